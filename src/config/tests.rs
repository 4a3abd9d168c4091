use super::*;

fn parse(s: &str) -> Result<Config> {
    let dir = std::env::temp_dir();
    Config::parse(&dir.join("pipeline.toml"), s)
}

#[test]
fn unknown_key_names_line_and_key() {
    let e = parse("[study]\nwarehouse = \"w\"\nwarehose = 1\n").unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("warehose"), "{e}");
}

#[test]
fn builtin_profiles_need_no_table_and_a_base_overrides_single_keys() {
    let head = "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"travis-ci\"\ndisplay = \"Travis CI\"\n";
    let src = |profile: &str| {
        format!("[[sources]]\nkind = \"crawl\"\nservice = \"travis-ci\"\nprofile = \"{profile}\"\nurl = \"https://docs.example.com\"\n")
    };
    let c = parse(&format!("{head}{}", src("travis-docs"))).unwrap();
    let p = &c.sources[0].crawl().unwrap().profile;
    assert_eq!(p.allowed_prefixes, ["/user/"]);
    let mirror = "[profiles.mirror]\nbase = \"travis-docs\"\nallowed_prefixes = [\"/snapshot/user/\"]\nstart_urls = [\"/snapshot/user/tutorial/\"]\n";
    let c = parse(&format!("{head}{}{mirror}", src("mirror"))).unwrap();
    let p = &c.sources[0].crawl().unwrap().profile;
    assert_eq!(
        (p.allowed_prefixes.as_slice(), p.start_urls.as_slice()),
        (&["/snapshot/user/".to_string()][..], &["/snapshot/user/tutorial/".to_string()][..])
    );
    assert_eq!(p.yaml_blocks, doc2ci_crawl::builtin("travis-docs").unwrap().yaml_blocks);
    let e = parse(&format!("{head}{}[profiles.mirror]\nbase = \"travis\"\n", src("mirror"))).unwrap_err().to_string();
    assert!(
        (e.contains(":11:") || e.contains(":12:"))
            && e.contains("no built-in profile `travis`")
            && e.contains("travis-docs"),
        "{e}"
    );
    let e =
        parse(&format!("{head}{}[profiles.mirror]\nbase = \"travis-docs\"\nyaml_block = [\"pre\"]\n", src("mirror")))
            .unwrap_err()
            .to_string();
    assert!((e.contains(":11:") || e.contains(":12:")) && e.contains("yaml_block"), "{e}");
    let e = parse(&format!("{head}{}", src("nope"))).unwrap_err().to_string();
    assert!(e.contains("no profile `nope`") && e.contains("github-docs"), "{e}");
}

#[test]
fn wrong_type_names_line() {
    let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = 3\ndisplay = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains("line 4"), "{e}");
}

#[test]
fn a_service_display_name_defaults_to_the_registry_s() {
    let c = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"gitlab-ci\"\n").unwrap();
    assert_eq!(c.services[0].display, "GitLab CI");
    let c = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"gitlab-ci\"\ndisplay = \"GL\"\n").unwrap();
    assert_eq!(c.services[0].display, "GL");
    let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"drone\"\n").unwrap_err().to_string();
    assert!(e.contains("pipeline.toml:3:") && e.contains("services.display") && e.contains("`drone`"), "{e}");
}

const HEAD: &str =
    "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n";

#[test]
fn generative_models_parse_with_defaults_and_keys() {
    let c = parse(&format!(
        "{HEAD}[[models]]\nname = \"small\"\nbackend = \"embedded\"\nmax_tokens = 256\n\
         [[models]]\nname = \"fleet\"\nbackend = \"openai\"\nbase_urls = [\"http://127.0.0.1:1/v1\", \"http://127.0.0.1:2/v1\"]\nmodel = \"qwen\"\napi_key_env = \"KEY_VAR\"\n\
         temperature = 0.7\nsamples = 5\nfew_shot = 3\nretrieval = true\nconcurrency = 8\nrpm = 600\nprice_per_1k_input = 0.5\n[models.params]\ntop_p = 0.9\n"
    ))
    .unwrap();
    let e = c.models[0].gen().unwrap();
    assert_eq!((e.key.temperature, e.key.samples, e.key.max_tokens, e.concurrency), (0.0, 1, 256, 8));
    assert_eq!(e.services, ["github-actions"]);
    let f = c.models[1].gen().unwrap();
    assert_eq!(f.base_urls.len(), 2);
    assert_eq!((f.key.model_id.as_str(), f.key.samples, f.key.few_shot, f.key.retrieval), ("qwen", 5, 3, 3));
    assert_eq!(f.key.params["top_p"], 0.9);
    assert_eq!(f.api_key_env.as_deref(), Some("KEY_VAR"));
}

#[test]
fn base_model_may_be_declared_after_its_fine_tune() {
    let c = parse(&format!("{HEAD}[[models]]\nname = \"ft\"\nbackend = \"embedded\"\nbase_model = \"base\"\n[[models]]\nname = \"base\"\nbackend = \"embedded\"\n")).unwrap();
    assert_eq!(c.models[0].base_model.as_deref(), Some("base"));
    assert_eq!(c.models[1].base_model, None);
}

#[test]
fn generative_model_errors_name_line_and_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\n", ":6:", "base_url"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"localhost:8080\"\n", ":9:", "not an http"),
        ("[[models]]\nname = \"x\"\nbackend = \"ollama\"\nbase_url = \"http://h\"\napi_key_env = \"K\"\n", ":10:", "api_key_env"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = \"sk-123 secret\"\n", ":10:", "environment variable"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nsamples = 3\n", ":9:", "temperature"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nmax_tokns = 3\n", "line 9", "max_tokns"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nmodel = \"none.gguf\"\n", ":9:", "`none.gguf` does not exist"),
        ("[[models]]\nname = \"x\"\nbackend = \"vllm\"\n", ":8:", "unknown backend"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\ntemperature = 5.0\n", ":9:", "between 0 and 2"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nbase_model = \"llama\"\n", ":9:", "base model `llama` is not declared"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nbase_model = \"x\"\n", ":9:", "names itself"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nformat = \"csv\"\n", ":9:", "`format` applies to the import backend, not embedded"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\ncolumns = { a = \"b\" }\n", ":10:", "`columns` applies to the import backend"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\nmax_cost = 5.0\n", ":10:", "max_cost needs price_per_1k_input"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\nprice_per_1k_input = 1.0\nmax_cost = -1.0\n", ":11:", "above 0"),
        ("[[models]]\nname = \"x\"\nbackend = \"import\"\npath = \"o.csv\"\nmax_cost = 1.0\n", ":10:", "`max_cost`"),
    ];
    for (body, line, what) in cases {
        let e = parse(&format!("{HEAD}{body}")).unwrap_err().to_string();
        assert!(e.contains(line) && e.contains(what), "{body}: {e}");
    }
}

/// A key pasted where a variable name belongs, quoted or not, is never echoed.
#[test]
fn pasted_keys_are_not_echoed() {
    for body in [
        "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = \"sk-live-ABCDEF123\"\n",
        "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = sk-live-ABCDEF123\n",
        "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"ftp://u:sk-live-ABCDEF123@h/v1?key=sk-live-ABCDEF123\"\n",
    ] {
        let e = parse(&format!("{HEAD}{body}")).unwrap_err().to_string();
        assert!(!e.contains("ABCDEF123"), "{e}");
        assert!(e.contains("line 10") || e.contains(":10:") || e.contains(":9:"), "names the place: {e}");
    }
}

#[test]
fn missing_file_and_duplicate_model_name_line() {
    let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"G\"\n[[sources]]\nkind = \"import\"\nservice = \"github-actions\"\npath = \"nope.csv\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(":9:") && e.contains("nope.csv") && e.contains("sources.path"), "{e}");
}

/// Keys are typed by the entry's kind: a key of the other kind is named as such on its own line
/// (keys without a span of their own used to be reported at the entry), any other is unknown.
#[test]
fn entry_keys_belong_to_their_kind() {
    std::fs::write(std::env::temp_dir().join("pairs-kind.csv"), "a\n").unwrap();
    let src = "[[sources]]\nkind = \"import\"\nservice = \"github-actions\"\npath = \"pairs-kind.csv\"\n";
    let cases: &[(&str, &str, &str)] = &[
        ("[[models]]\nname = \"x\"\nbackend = \"import\"\npath = \"o.csv\"\nrpm = 5\n", ":10:", "`rpm` applies to generative backends"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nskip_bad_rows = true\n", ":9:", "`skip_bad_rows` applies to the import backend"),
        ("[[models]]\nname = \"x\"\nbackend = \"import\"\npath = \"o.csv\"\npathh = 1\n", "line 10", "pathh"),
        ("[[models]]\nname = \"x\"\nbackend = \"ollama\"\nbase_url = \"http://h\"\nparams = { top_p = 1 }\nnum_ctx = 4\n", "", "ok"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\nnum_ctx = 4\n", ":10:", "`num_ctx` is a setting of ollama"),
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\n[models.params]\ntop_p = 1\n", ":9:", "takes no extra request parameters"),
        // Each backend's keys are its own type: a server's limits mean nothing in-process, an API
        // key nothing to Ollama, a key no backend takes is unknown and every key taken is listed.
        ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nrpm = 5\n", ":9:", "the embedded backend takes no `rpm` (`rpm` is a setting of openai, ollama, openai-responses, openai-batch)"),
        ("[[models]]\nname = \"x\"\nbackend = \"ollama\"\nbase_url = \"http://h\"\napi_key_env = \"K\"\n", ":10:", "the ollama backend takes no API key (`api_key_env` is a setting of openai, openai-responses, openai-batch)"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_envv = \"K\"\n", "line 10", "`api_key_envv`, expected one of"),
        ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_envv = \"K\"\n", "line 10", "`cache_namespace`, `api_key_env`"),
        ("[[models]]\nname = \"x\"\nbackend = \"ollama\"\n", "10: `models.base_url`", "the ollama backend needs `base_url`"),
    ];
    for (body, line, what) in cases {
        let r = parse(&format!("{HEAD}{src}{body}"));
        if *what == "ok" {
            r.unwrap();
            continue;
        }
        let e = r.unwrap_err().to_string();
        let line = line.replace(":10:", ":14:").replace(":9:", ":13:").replace("line 10", "line 14");
        assert!(e.contains(&line) && e.contains(what), "{body}: {e}");
    }
    let sources: &[(&str, &str, &str)] = &[
        ("kind = \"import\"\nservice = \"github-actions\"\npath = \"pairs-kind.csv\"\nurl = \"https://docs.example.com\"\n", ":10:", "only crawl sources take this key"),
        ("kind = \"crawl\"\nservice = \"github-actions\"\nprofile = \"travis-docs\"\nurl = \"https://docs.example.com\"\npath = \"p\"\n", ":11:", "takes `serve` or `url`, not this key"),
        ("kind = \"crawl\"\nservice = \"github-actions\"\nprofile = \"travis-docs\"\nurl = \"https://docs.example.com\"\nskip_bad_rows = true\n", ":11:", "a crawl source has no columns"),
        ("kind = \"crawl\"\nservice = \"github-actions\"\nprofile = \"travis-docs\"\nurll = \"https://docs.example.com\"\n", "line 10", "urll"),
        ("kind = \"mirror\"\nservice = \"github-actions\"\n", ":7:", "unsupported kind `mirror`"),
    ];
    for (body, line, what) in sources {
        let e = parse(&format!("{HEAD}[[sources]]\n{body}")).unwrap_err().to_string();
        assert!(e.contains(line) && e.contains(what), "{body}: {e}");
    }
}

/// A model as `pipeline.toml` would declare it.
fn model(backend: &str, model: &str, extra: &str) -> GenSettings {
    let cfg = format!(
        "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"G\"\n\
         [[models]]\nname = \"x\"\nbackend = \"{backend}\"\nmodel = \"{model}\"\n{extra}\n"
    );
    let c = Config::parse(&std::env::temp_dir().join("p.toml"), &cfg).unwrap();
    c.models[0].gen().unwrap().clone()
}

#[test]
fn request_cache_keys_follow_what_shapes_the_answer() {
    let url = "base_url = \"http://127.0.0.1:8000/v1\"";
    let oa = model("openai", "m", url);
    let k = crate::backends::RequestCache::key(&oa, &req("a"), 0);
    assert_eq!(k, crate::backends::RequestCache::key(&oa, &req("a"), 0));
    assert_ne!(k, crate::backends::RequestCache::key(&oa, &req("b"), 0));
    assert_ne!(k, crate::backends::RequestCache::key(&model("openai", "m2", url), &req("a"), 0));
    assert_ne!(k, crate::backends::RequestCache::key(&model("ollama", "m", url), &req("a"), 0));
    assert_ne!(k, crate::backends::RequestCache::key(&oa, &req("a"), 1), "sample k is its own draw");
    let mut hot = req("a");
    hot.temperature = 0.7;
    assert_ne!(k, crate::backends::RequestCache::key(&oa, &hot, 0));
    // Another server with a model of the same name is another model.
    let other = model("openai", "m", "base_url = \"http://127.0.0.1:8001/v1\"");
    assert_ne!(k, crate::backends::RequestCache::key(&other, &req("a"), 0));
    // The same server spelt otherwise, or with credentials in its URL, is the same one.
    let same = model("openai", "m", "base_url = \"http://user:pw@127.0.0.1:8000/v1/\"");
    assert_eq!(k, crate::backends::RequestCache::key(&same, &req("a"), 0));
    // A declared namespace is shared by whichever endpoints name it, and only by them.
    let ns = |u: &str| model("openai", "m", &format!("base_url = \"{u}\"\ncache_namespace = \"fleet\""));
    let kn = crate::backends::RequestCache::key(&ns("http://a:1/v1"), &req("a"), 0);
    assert_eq!(kn, crate::backends::RequestCache::key(&ns("http://b:2/v1"), &req("a"), 0));
    assert_ne!(kn, k);
    // Ollama's context window changes what the model reads.
    let ol = |ctx: u32| model("ollama", "m", &format!("{url}\nnum_ctx = {ctx}"));
    assert_ne!(
        crate::backends::RequestCache::key(&ol(2048), &req("a"), 0),
        crate::backends::RequestCache::key(&ol(8192), &req("a"), 0)
    );
}

#[test]
fn embedded_answers_are_keyed_by_the_weights_content() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.gguf");
    std::fs::write(&f, b"weights one").unwrap();
    let mut g = model("embedded", f.to_str().unwrap(), "");
    g.model_file = Some(f.clone());
    let k1 = crate::backends::RequestCache::key(&g, &req("a"), 0);
    // Same path, other content (the cache is per process by size and time: change both).
    std::fs::write(&f, b"weights two, longer").unwrap();
    assert_ne!(k1, crate::backends::RequestCache::key(&g, &req("a"), 0));
}

fn req(text: &str) -> doc2ci_llm::Request {
    doc2ci_llm::Request {
        messages: vec![doc2ci_llm::Message::new("user", text)],
        temperature: 0.0,
        max_tokens: 64,
        seed: None,
        extra: Default::default(),
    }
}

/// Issue 31: credentials written into a source's URL reach the site, and nothing else.
#[test]
fn credentials_in_a_source_url_are_kept_apart() {
    let c = parse(
        "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"travis-ci\"\ndisplay = \"T\"\n[[sources]]\nkind = \"crawl\"\n\
         service = \"travis-ci\"\nprofile = \"travis-docs\"\nurl = \"https://bob:s%40cret+1@docs.example.com/\"\n",
    )
    .unwrap();
    let spec = c.sources[0].crawl().unwrap();
    assert_eq!(spec.url.as_deref(), Some("https://docs.example.com/"));
    let auth = spec.auth.clone().unwrap();
    assert_eq!((auth.user.as_str(), auth.password.as_deref()), ("bob", Some("s@cret+1")));
    let shown = format!("{:?} {}", c.sources[0], serde_json::to_string(&c.sources[0]).unwrap());
    assert!(!shown.contains("cret") && !shown.contains("bob"), "{shown}");
    let e = parse(
        "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"travis-ci\"\ndisplay = \"T\"\n[[sources]]\nkind = \"crawl\"\n\
         service = \"travis-ci\"\nprofile = \"travis-docs\"\nurl = \"ftp://bob:hunter2@docs.example.com/\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains("hunter2"), "{e}");
}
