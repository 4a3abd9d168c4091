fn main() {
    std::process::exit(doc2ci::cli::main());
}
