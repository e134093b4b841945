//! Text preprocessing: WordPiece ids from the zoo's `tokenizer.json` (the one the training
//! script used through Python's `tokenizers`, which is this same Rust code), no padding per
//! item, truncated at the model's maximum; batches are right-padded with id 0, mask 0.

use std::path::Path;

use cocktail_common::oip::limits::MAX_TEXT_CHARS;
use ndarray::Array2;
use tokenizers::{Tokenizer, TruncationParams};

use crate::{Batch, WorkerError};

/// A tokenizer configured for one model.
#[derive(Debug)]
pub struct TextPreprocessor {
    tokenizer: Tokenizer,
    max_tokens: usize,
}

impl TextPreprocessor {
    pub fn load(path: &Path, max_tokens: usize) -> Result<Self, WorkerError> {
        let fail = |message: String| WorkerError::Tokenizer {
            path: path.display().to_string(),
            message,
        };
        let mut tokenizer = Tokenizer::from_file(path).map_err(|e| fail(e.to_string()))?;
        // The file pads every item to 128 tokens; batching pads only to the longest item.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            tokenizer,
            max_tokens,
        })
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Number of ids the vocabulary holds, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The ids of one text, special tokens included.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>, WorkerError> {
        if text.trim().is_empty() {
            return Err(WorkerError::invalid("text", "must not be empty"));
        }
        let chars = text.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(WorkerError::invalid(
                "text",
                format!("{chars} characters is over the limit of {MAX_TEXT_CHARS}"),
            ));
        }
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| WorkerError::invalid("text", format!("cannot tokenize: {e}")))?;
        Ok(encoding.get_ids().iter().map(|&id| i64::from(id)).collect())
    }

    /// One text as a row of ids with its attention mask.
    pub fn row(&self, text: &str) -> Result<TokenRow, WorkerError> {
        let ids = self.encode(text)?;
        let mask = vec![1; ids.len()];
        Ok(TokenRow { ids, mask })
    }

    /// Tokenizes the texts into one right-padded batch.
    pub fn batch(&self, texts: &[&str]) -> Result<Batch, WorkerError> {
        let rows = texts
            .iter()
            .map(|t| self.row(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(pad(&rows.iter().collect::<Vec<_>>()))
    }
}

/// One item's token ids and attention mask (equal lengths).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRow {
    pub ids: Vec<i64>,
    pub mask: Vec<i64>,
}

/// Rows right-padded with id 0 and mask 0 to the longest, in order.
pub fn pad(rows: &[&TokenRow]) -> Batch {
    let seq = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
    let mut input_ids = Array2::<i64>::zeros((rows.len(), seq));
    let mut attention_mask = Array2::<i64>::zeros((rows.len(), seq));
    for (i, row) in rows.iter().enumerate() {
        for (j, (&id, &m)) in row.ids.iter().zip(&row.mask).enumerate() {
            input_ids[[i, j]] = id;
            attention_mask[[i, j]] = m;
        }
    }
    Batch::Tokens {
        input_ids,
        attention_mask,
    }
}
