//! Issue 16: the warehouse on object storage. The llm4ci study mirrored to a real S3-compatible
//! server (moto's, from PyPI, with its IAM signature checks on: `peers/s3_server.py`), killed
//! mid-upload, finished by the next run, and read back from the bucket with Polars.

use crate::common::*;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct S3 {
    child: Child,
    conf: serde_json::Value,
}

impl S3 {
    fn start() -> S3 {
        let mut child = Command::new("python3")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["-m", "peers.s3_server"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m peers.s3_server (moto[server] from scripts/deps.sh test)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let conf = serde_json::from_str(&line).unwrap_or_else(|_| panic!("s3_server.py said {line:?}"));
        S3 { child, conf }
    }

    /// The store's environment for doc2ci, with `secret`.
    fn env(&self, c: &mut Command, secret: &str) {
        c.env("AWS_ACCESS_KEY_ID", self.conf["key_id"].as_str().unwrap())
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_ENDPOINT_URL", self.conf["endpoint"].as_str().unwrap())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true");
    }

    fn secret(&self) -> &str {
        self.conf["secret"].as_str().unwrap()
    }

    /// Runs Python with `s3` (a boto3 client) and `pl_opts` (Polars' storage options) defined.
    fn py(&self, code: &str) -> serde_json::Value {
        let prelude = format!(
            "import boto3, json, hashlib, io\ns3 = boto3.client('s3', endpoint_url='{e}', region_name='us-east-1', \
             aws_access_key_id='{k}', aws_secret_access_key='{s}')\npl_opts = {{'aws_endpoint_url': '{e}', \
             'aws_access_key_id': '{k}', 'aws_secret_access_key': '{s}', 'aws_region': 'us-east-1', 'aws_allow_http': 'true'}}\n\
             def objects(prefix):\n    out = {{}}\n    for page in s3.get_paginator('list_objects_v2').paginate(Bucket='doc2ci', Prefix=prefix):\n        \
             for o in page.get('Contents', []):\n            out[o['Key']] = s3.get_object(Bucket='doc2ci', Key=o['Key'])['Body'].read()\n    return out\n",
            e = self.conf["endpoint"].as_str().unwrap(),
            k = self.conf["key_id"].as_str().unwrap(),
            s = self.secret()
        );
        let out = Command::new("python3").args(["-c", &format!("{prelude}{code}")]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Every object under `prefix`: key → blake3-free digest (sha256 hex) of its bytes.
    fn digests(&self, prefix: &str) -> std::collections::BTreeMap<String, String> {
        let v = self.py(&format!(
            "print(json.dumps({{k: hashlib.sha256(b).hexdigest() for k, b in objects('{prefix}').items()}}))"
        ));
        serde_json::from_value(v).unwrap()
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sha256(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// Local warehouse files (tables and report), relative, as keys under `study/`.
fn local(wh: &Path) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![wh.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(wh).unwrap().to_string_lossy().into_owned();
            if rel == "_doc2ci" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(format!("study/{rel}"), sha256(&p));
            }
        }
    }
    out
}

#[test]
fn the_llm4ci_study_on_s3_survives_kill_9_mid_upload_and_reads_back_with_polars() {
    let s3 = S3::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), MODELS, "[stages.validate]\nenabled = true\n");
    let text = std::fs::read_to_string(&cfg).unwrap();
    // write_config turns validate off after `extra`; the validations are part of the study here.
    let text = text.replace("threads = 2\n", "threads = 2\nremote = \"s3://doc2ci/study\"\n");
    let text = text.replacen("[stages.validate]\nenabled = false\n", "", 1);
    std::fs::write(&cfg, text).unwrap();
    let c = cfg.to_str().unwrap();
    let wh = dir.path().join("wh");

    // Killed while the mirror is being written: a pause before each upload lets the kill land there.
    let mut cmd = doc2ci(&["run", "--config", c]);
    s3.env(&mut cmd, s3.secret());
    let mut child =
        cmd.env("DOC2CI_TEST_REMOTE_DELAY_MS", "300").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let record = wh.join("_doc2ci/remote.json");
    let t0 = Instant::now();
    let uploaded = || {
        std::fs::read(&record)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .map_or(0, |v| v["files"].as_object().map_or(0, |f| f.len()))
    };
    while uploaded() < 3 && t0.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let files = local(&wh);
    let mut partial = s3.digests("study/");
    // The manifest goes up before the first upload: what the mirror is about to write is its own.
    assert!(partial.remove("study/_doc2ci/manifest.json").is_some(), "no manifest before the uploads");
    assert!(
        partial.len() >= 3 && partial.len() < files.len(),
        "killed mid-upload: {} of {}",
        partial.len(),
        files.len()
    );
    // Every object a reader can see is a whole file, byte for byte the local one.
    for (k, d) in &partial {
        assert_eq!(files.get(k), Some(d), "{k} is visible but not the complete file");
    }

    // The next run has nothing to compute and finishes the mirror.
    let mut cmd = doc2ci(&["run", "--config", c]);
    s3.env(&mut cmd, s3.secret());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut remote = s3.digests("study/");
    let manifest = remote.remove("study/_doc2ci/manifest.json").expect("the manifest is written last");
    assert!(!manifest.is_empty());
    assert_eq!(remote, local(&wh), "the bucket holds exactly the warehouse");

    // Read back from the bucket with Polars, as a cluster job would; the counts are DuckDB's locally.
    let counts = s3.py(
        "import polars as pl\nout = {}\nfor t in ['pairs', 'generations', 'validations']:\n    \
         out[t] = pl.scan_parquet(f's3://doc2ci/study/{t}/**/*.parquet', hive_partitioning=True, storage_options=pl_opts)\
         .select(pl.len()).collect().item()\nprint(json.dumps(out))",
    );
    for t in ["pairs", "generations", "validations"] {
        let n =
            duck(&wh, &format!("SELECT COUNT(*) FROM read_parquet('{{wh}}/{t}/**/*.parquet', hive_partitioning=true)"));
        assert_eq!(counts[t], n[0][0], "{t}: Polars on the bucket vs DuckDB on the warehouse");
    }
    assert_eq!(counts["generations"], 4350);

    // The server checks signatures: a wrong secret is refused, and the error says so.
    let mut cmd = doc2ci(&["push", "--config", c]);
    s3.env(&mut cmd, "not-the-secret");
    std::fs::remove_file(&record).unwrap(); // forget what was uploaded, so push must talk to the store
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a wrong secret was accepted");
    assert!(err.contains("SignatureDoesNotMatch") || err.contains("403"), "{err}");
    assert!(!err.contains("not-the-secret"), "the secret is never echoed: {err}");

    // Another study on a neighbouring prefix, and a note someone left inside this one: the mirror
    // wrote neither, so it deletes neither.
    s3.py("s3.put_object(Bucket='doc2ci', Key='study2/pairs/part-0.parquet', Body=b'theirs')\n\
         s3.put_object(Bucket='doc2ci', Key='study/NOTES.md', Body=b'mine')\nprint('{}')");
    // A model dropped from the study: after gc, push removes its partitions from the bucket too.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let drop = format!(
        "\n[[models]]\nname = \"gpt-4o\"\nbackend = \"import\"\npath = \"{}\"\nfamily = \"x\"\n",
        output_file("gpt-4o").display()
    );
    assert!(text.contains(&drop));
    std::fs::write(&cfg, text.replace(&drop, "")).unwrap();
    run_ok(&["gc", "--config", c]);
    let mut cmd = doc2ci(&["push", "--config", c]);
    s3.env(&mut cmd, s3.secret());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut remote = s3.digests("study/");
    remote.remove("study/_doc2ci/manifest.json");
    assert!(!remote.keys().any(|k| k.contains("model=gpt-4o/")), "stale partitions left in the bucket");
    assert!(remote.remove("study/NOTES.md").is_some(), "an object the mirror did not write was deleted");
    assert_eq!(remote, local(&wh));
    assert_eq!(s3.digests("study2/").len(), 1, "the neighbouring study was touched");
    // A fresh warehouse pointed at the populated mirror is refused before it deletes anything.
    let fresh = tempfile::tempdir().unwrap();
    let cfg2 = fresh.path().join("pipeline.toml");
    std::fs::copy(&cfg, &cfg2).unwrap();
    let mut cmd = doc2ci(&["run", "--config", cfg2.to_str().unwrap()]);
    s3.env(&mut cmd, s3.secret());
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("mirror of another warehouse"), "{err}");
    let mut after = s3.digests("study/");
    after.remove("study/_doc2ci/manifest.json");
    after.remove("study/NOTES.md");
    assert_eq!(after, local(&wh), "the refused run changed the bucket");
}
