//! The container files, checked where no container engine runs (CI builds the image only where
//! one does): `docker-compose.yml` starts Heurist with a model server and SearXNG, keeps
//! `data_dir` and the backups on named volumes, mounts a SearXNG `settings.yml` that enables the JSON format,
//! and passes Heurist only environment variables it knows (the ones `.env.example`
//! documents); the `Dockerfile` runs as a non-root user with `data_dir` and the backups volumes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The variables `.env.example` documents, set or commented out (`# NAME=value`).
fn known_variables() -> HashSet<String> {
    std::fs::read_to_string(repo(".env.example"))
        .unwrap()
        .lines()
        .filter_map(|line| {
            let line = line.trim_start_matches('#').trim();
            let (name, _) = line.split_once('=')?;
            let known = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            known.then(|| name.to_string())
        })
        .collect()
}

/// A short-syntax mount `source:target[:mode]` as (source, target).
fn mount(entry: &Value) -> (String, String) {
    let text = entry.as_str().expect("short-syntax volume entries");
    let mut parts = text.split(':');
    let source = parts.next().unwrap().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    (source, target)
}

/// The host of `url` (`http://llm:8080/v1` → `llm`).
fn host(url: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .host_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_compose_file_starts_heurist_with_a_model_server_and_searxng() {
    let compose = yaml(&repo("docker-compose.yml"));
    let services = &compose["services"];
    for name in ["heurist", "llm", "searxng"] {
        assert!(services[name].is_mapping(), "service {name}");
    }
    let heurist = &services["heurist"];
    let env = heurist["environment"].as_mapping().unwrap();
    let var = |name: &str| {
        env[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name}"))
            .to_string()
    };

    let known = known_variables();
    for name in env.keys() {
        let name = name.as_str().unwrap();
        assert!(
            known.contains(name),
            "{name} is not a variable the bot knows"
        );
    }
    assert_eq!(host(&var("OPENAI_BASE_URL")), "llm");
    assert_eq!(host(&var("HEURIST_SEARXNG_URL")), "searxng");
    assert!(
        services["llm"]["image"]
            .as_str()
            .unwrap()
            .starts_with("ghcr.io/ggml-org/llama.cpp:server")
    );

    // data_dir and the backups are named volumes the compose file declares.
    let mounts: Vec<(String, String)> = heurist["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(mount)
        .collect();
    for name in ["HEURIST_DATA_DIR", "HEURIST_BACKUP_DIR"] {
        let dir = var(name);
        let (volume, _) = mounts
            .iter()
            .find(|(_, target)| *target == dir)
            .unwrap_or_else(|| panic!("a volume at {name}"));
        assert!(
            compose["volumes"]
                .as_mapping()
                .unwrap()
                .contains_key(volume.as_str()),
            "{volume} is declared"
        );
    }
    // The config (and skills under it) mount where the image reads them.
    assert!(mounts.iter().any(|(_, target)| target == "/app/config"));

    // SearXNG gets a settings.yml with the JSON format enabled.
    let searxng: Vec<(String, String)> = services["searxng"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(mount)
        .collect();
    let (settings, _) = searxng
        .iter()
        .find(|(_, target)| target == "/etc/searxng/settings.yml")
        .expect("a settings.yml mounted");
    let settings = yaml(&repo(settings.trim_start_matches("./")));
    let formats: Vec<&str> = settings["search"]["formats"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(formats.contains(&"json"), "{formats:?}");
}

#[test]
fn the_image_runs_unprivileged_with_data_dir_a_volume() {
    let dockerfile = std::fs::read_to_string(repo("Dockerfile")).unwrap();
    let runtime = dockerfile
        .rsplit_once("\nFROM ")
        .map(|(_, stage)| stage)
        .unwrap();
    for line in [
        "gcr.io/distroless/static-debian12:nonroot",
        "\nUSER 65532:65532\n",
        "\nENV HEURIST_DATA_DIR=/data\n",
        "\nENV HEURIST_BACKUP_DIR=/backups\n",
        "\nVOLUME [\"/data\", \"/backups\"]\n",
        "\nWORKDIR /app\n",
        "\nENTRYPOINT [\"/usr/local/bin/heurist\"]\n",
    ] {
        assert!(runtime.contains(line), "the runtime stage has {line:?}");
    }
    let ignored = std::fs::read_to_string(repo(".dockerignore")).unwrap();
    for path in [".env", "target", "data"] {
        assert!(
            ignored.lines().any(|l| l == path),
            "{path} stays out of the image"
        );
    }
}
