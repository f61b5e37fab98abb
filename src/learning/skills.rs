//! Skills: `config/skills/<name>/SKILL.md` files in the Agent Skills format other agents use,
//! so existing skills can be dropped in: YAML front matter (`name`, equal to the folder name,
//! and `description`; other fields allowed) and a Markdown body with the instructions.
//!
//! A broken skill is skipped with a warning naming its file; it never stops the bot.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A loaded skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The instructions, injected into the prompt of a turn the skill matches.
    pub body: String,
    pub path: PathBuf,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: String,
    description: String,
}

/// Loads every `<dir>/<name>/SKILL.md`, sorted by name; broken ones are skipped with a warning.
pub(crate) fn load_skills(dir: &Path) -> Vec<Skill> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::info!(dir = %dir.display(), error = %e, "no skills loaded");
            return Vec::new();
        }
    };
    let mut skills: Vec<Skill> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| {
            let path = entry.path().join("SKILL.md");
            let folder = entry.file_name().to_string_lossy().into_owned();
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "skipping skill: cannot read it");
                    return None;
                }
            };
            match parse_skill(&text, &folder) {
                Ok((name, description, body)) => Some(Skill { name, description, body, path }),
                Err(why) => {
                    tracing::warn!(file = %path.display(), %why, "skipping broken skill");
                    None
                }
            }
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    tracing::info!(count = skills.len(), "skills loaded");
    skills
}

/// Parses a SKILL.md: `(name, description, body)`, or why it is broken.
pub(crate) fn parse_skill(text: &str, folder: &str) -> Result<(String, String, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---")
        .and_then(|r| r.strip_prefix('\n').or_else(|| r.strip_prefix("\r\n")))
        .ok_or("it does not start with a --- front matter line")?;
    let end = rest
        .find("\n---")
        .ok_or("the front matter has no closing --- line")?;
    let yaml = &rest[..end];
    let body = rest[end + 4..].trim_start_matches(['-']).trim();
    let front: FrontMatter =
        serde_yaml_ng::from_str(yaml).map_err(|e| format!("invalid front matter: {e}"))?;
    if front.name != folder {
        return Err(format!(
            "name {:?} differs from its folder {folder:?}",
            front.name
        ));
    }
    if front.description.trim().is_empty() {
        return Err("the description is empty".to_string());
    }
    if body.is_empty() {
        return Err("the body is empty".to_string());
    }
    Ok((
        front.name,
        front.description.trim().to_string(),
        body.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_cases() {
        struct Case {
            name: &'static str,
            text: &'static str,
            ok: bool,
        }
        let cases = [
            Case {
                name: "valid",
                text: "---\nname: demo\ndescription: Does things\nlicense: MIT\n---\n# Demo\nSteps.",
                ok: true,
            },
            Case {
                name: "crlf",
                text: "---\r\nname: demo\r\ndescription: x\r\n---\r\nbody",
                ok: true,
            },
            Case {
                name: "no front matter",
                text: "# Demo\n",
                ok: false,
            },
            Case {
                name: "unclosed",
                text: "---\nname: demo\n",
                ok: false,
            },
            Case {
                name: "bad yaml",
                text: "---\nname: [demo\n---\nbody",
                ok: false,
            },
            Case {
                name: "missing description",
                text: "---\nname: demo\n---\nbody",
                ok: false,
            },
            Case {
                name: "name differs from folder",
                text: "---\nname: other\ndescription: x\n---\nbody",
                ok: false,
            },
            Case {
                name: "empty body",
                text: "---\nname: demo\ndescription: x\n---\n",
                ok: false,
            },
        ];
        for case in &cases {
            assert_eq!(
                parse_skill(case.text, "demo").is_ok(),
                case.ok,
                "case {}: {:?}",
                case.name,
                parse_skill(case.text, "demo")
            );
        }
        let (_, description, body) = parse_skill(cases[0].text, "demo").unwrap();
        assert_eq!(description, "Does things");
        assert_eq!(body, "# Demo\nSteps.");
    }

    #[test]
    fn the_shipped_skills_load() {
        let skills = load_skills(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/skills"
        )));
        assert!(skills.len() >= 3, "{skills:?}");
    }
}
