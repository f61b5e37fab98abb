//! Embeddings: the one call that computes them (charged to the user whose turn it serves),
//! the skills' embeddings cached once per run, and a message's. Without an embeddings model,
//! or when it fails, retrieval and dedupe work on words alone.

use super::Learning;
use crate::budget::Payer;
use crate::llm::{LlmClient, Priority};

/// One embeddings call charged to `payer`: a server that reports no usage is charged the
/// inputs' estimate, since the input is all an embedding costs.
async fn embed_paid(
    llm: &LlmClient,
    model: &str,
    texts: &[String],
    priority: Priority,
    payer: &Payer,
) -> Result<Vec<Vec<f32>>, crate::llm::LlmError> {
    let estimate: u64 = texts
        .iter()
        .map(|t| u64::try_from(t.len() / 3 + 1).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    let hold = payer.reserve(estimate).await?;
    let (vectors, usage) = match llm.embed(model, texts, priority).await {
        Ok(done) => done,
        Err(e) => {
            hold.release();
            return Err(e);
        }
    };
    hold.settle(usage.unwrap_or(crate::llm::Usage {
        prompt_tokens: estimate,
        completion_tokens: 0,
        cached_tokens: 0,
    }));
    Ok(vectors)
}

impl Learning {
    /// The skills' embeddings, computed once; `None` when there is no model or it failed.
    pub(super) async fn skill_embeddings(&self) -> Option<&Vec<Vec<f32>>> {
        let model = self.config.embedding_model.as_str();
        self.skill_vectors
            .get_or_init(|| async {
                let texts: Vec<String> = self
                    .skills
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.description))
                    .collect();
                // Shared by every user's turns: the bot pays.
                let payer = self.ledger.payer(None, None);
                match embed_paid(&self.llm, model, &texts, Priority::Interactive, &payer).await {
                    Ok(vectors) => Some(vectors),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot embed skills; matching with BM25 only");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The embeddings of `texts`, if an embeddings model is configured and answers (and
    /// `payer`'s budget allows the call).
    pub(super) async fn embed(
        &self,
        texts: &[String],
        priority: Priority,
        payer: &Payer,
    ) -> Option<Vec<Vec<f32>>> {
        let model = self.config.embedding_model.as_str();
        if model.is_empty() || texts.is_empty() {
            return None;
        }
        match embed_paid(&self.llm, model, texts, priority, payer).await {
            Ok(vectors) if vectors.len() == texts.len() => Some(vectors),
            Ok(_) => {
                tracing::warn!("the embeddings model answered with the wrong number of vectors");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot embed; matching with BM25 only");
                None
            }
        }
    }

    /// The embedding of `message`, charged to `payer` (see [`Self::embed`]).
    pub(super) async fn embed_query(&self, message: &str, payer: &Payer) -> Option<Vec<f32>> {
        self.embed(&[message.to_string()], Priority::Interactive, payer)
            .await?
            .pop()
    }
}
