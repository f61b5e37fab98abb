//! Files from Telegram: for vision-capable models the photo size to fetch and the download as
//! a `data:` URL the model can read; the bytes of recordings and documents a turn reads. (What a user is told when their chat's model cannot
//! see images is in [`crate::texts::telegram`].)

use base64::Engine;
use teloxide::net::Download;
use teloxide::prelude::*;
use teloxide::types::{FileId, PhotoSize};

use super::send::{SendPolicy, with_retry_bot};

/// The largest size of a photo that is at most `max_bytes` (Telegram lists sizes smallest
/// first), or the smallest if none is small enough.
pub(crate) fn pick_photo(sizes: &[PhotoSize], max_bytes: u32) -> Option<&PhotoSize> {
    sizes
        .iter()
        .filter(|p| p.file.size <= max_bytes)
        .max_by_key(|p| p.file.size)
        .or_else(|| sizes.iter().min_by_key(|p| p.file.size))
}

/// Downloads file `file_id` (refusing more than `max_bytes`) as a base64 `data:` URL.
pub(crate) async fn download_image(
    bot: &Bot,
    policy: &SendPolicy,
    file_id: &str,
    max_bytes: u32,
) -> anyhow::Result<String> {
    let (file, bytes) = fetch(bot, policy, file_id, max_bytes).await?;
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

/// Downloads file `file_id` (a recording, a document), refusing more than `max_bytes`.
pub(crate) async fn download(
    bot: &Bot,
    policy: &SendPolicy,
    file_id: &str,
    max_bytes: u32,
) -> anyhow::Result<Vec<u8>> {
    Ok(fetch(bot, policy, file_id, max_bytes).await?.1)
}

/// The file `file_id` and its bytes, refusing more than `max_bytes` (as `getFile` tells its
/// size, and again as it arrives). `getFile` is paced and retried like every Bot API call;
/// the download itself comes from Telegram's file server, which has no flood control.
async fn fetch(
    bot: &Bot,
    policy: &SendPolicy,
    file_id: &str,
    max_bytes: u32,
) -> anyhow::Result<(teloxide::types::File, Vec<u8>)> {
    let file = with_retry_bot(policy, "getFile", || {
        bot.get_file(FileId(file_id.to_string())).send()
    })
    .await?;
    if file.size > max_bytes {
        anyhow::bail!(
            "the file has {} bytes, more than the {max_bytes} allowed",
            file.size
        );
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(file.size as usize);
    bot.download_file(&file.path, &mut bytes).await?;
    if bytes.len() > max_bytes as usize {
        anyhow::bail!("the file has more than the {max_bytes} bytes allowed");
    }
    Ok((file, bytes))
}
