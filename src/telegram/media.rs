//! Images from Telegram for vision-capable models: the photo size to fetch, and the download
//! as a `data:` URL the model can read; for other models, what the user is told instead.

use base64::Engine;
use teloxide::net::Download;
use teloxide::prelude::*;
use teloxide::types::{FileId, PhotoSize};

use super::send::{SendPolicy, with_retry_bot};

/// The largest size of a photo that is at most `max_bytes` (Telegram lists sizes smallest
/// first), or the smallest if none is small enough.
pub fn pick_photo(sizes: &[PhotoSize], max_bytes: u32) -> Option<&PhotoSize> {
    sizes
        .iter()
        .filter(|p| p.file.size <= max_bytes)
        .max_by_key(|p| p.file.size)
        .or_else(|| sizes.iter().min_by_key(|p| p.file.size))
}

/// Downloads file `file_id` (refusing more than `max_bytes`) as a base64 `data:` URL.
/// `getFile` is paced and retried like every Bot API call; the download itself comes from
/// Telegram's file server, which has no flood control.
pub async fn download_image(
    bot: &Bot,
    policy: &SendPolicy,
    file_id: &str,
    max_bytes: u32,
) -> anyhow::Result<String> {
    let file = with_retry_bot(policy, "getFile", || {
        bot.get_file(FileId(file_id.to_string())).send()
    })
    .await?;
    if file.size > max_bytes {
        anyhow::bail!(
            "the image has {} bytes, more than the {max_bytes} allowed",
            file.size
        );
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(file.size as usize);
    bot.download_file(&file.path, &mut bytes).await?;
    if bytes.len() > max_bytes as usize {
        anyhow::bail!("the image has more than the {max_bytes} bytes allowed");
    }
    let mime = match file
        .path
        .rsplit('.')
        .next()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "image/jpeg",
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:{mime};base64,{data}"))
}

/// What the model reads after a caption whose photo it cannot see, so its answer does not
/// pretend to have seen it.
pub(crate) const UNSEEN_PHOTO: &str = "[A photo was attached; this model cannot see images.]";

/// The note for a photo sent to a chat whose model `current` cannot read images: one line that
/// the image was not seen (and, with a `captioned` photo, that the caption is answered), then
/// what works: an admin's `/model <id>` in this chat to one of `vision_models`, or, with none
/// configured, a model with `vision = true` added by the bot's owner.
pub(crate) fn unseen_image_note(current: &str, vision_models: &[&str], captioned: bool) -> String {
    let seen = if captioned {
        "so I answer its caption as text"
    } else {
        "so I cannot answer it; ask your question as text or as a photo's caption"
    };
    let advice = match vision_models {
        [] => "None of the configured models reads images; the bot's owner can add one with \
               vision = true in its [[models]] entry."
            .to_string(),
        [first, ..] => format!(
            "To send images, an admin can switch this chat to a model that reads them: \
             /model {first} here (models with vision: {}).",
            vision_models.join(", ")
        ),
    };
    format!(
        "🖼 I did not see the image: this chat's model, {current}, cannot read images, {seen}.\n{advice}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_says_the_image_was_not_seen_and_what_works() {
        struct Case {
            name: &'static str,
            vision: Vec<&'static str>,
            captioned: bool,
            says: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "caption, one vision model",
                vision: vec!["gpt-4o"],
                captioned: true,
                says: &[
                    "did not see the image",
                    "model, m1,",
                    "answer its caption",
                    "/model gpt-4o here (models with vision: gpt-4o)",
                ],
            },
            Case {
                name: "no caption, two vision models",
                vision: vec!["a", "b"],
                captioned: false,
                says: &["cannot answer it", "/model a here", "vision: a, b)"],
            },
            Case {
                name: "no vision model configured",
                vision: vec![],
                captioned: true,
                says: &["None of the configured models", "vision = true"],
            },
        ];
        for case in cases {
            let note = unseen_image_note("m1", &case.vision, case.captioned);
            assert_eq!(note.lines().count(), 2, "case {}: {note}", case.name);
            for said in case.says {
                assert!(
                    note.contains(said),
                    "case {}: {said:?} in {note}",
                    case.name
                );
            }
        }
    }
}
