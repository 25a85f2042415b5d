//! A response body read as `benchmark_serving.py` reads it (InferenceX's and sa-bench's copies;
//! `bench-serving` only, spec `bench-serving.md` §8.1): every non-empty line is a message of its
//! own, with no SSE framing. Where the house reading ([`super::sse`]) and upstream's differ (a
//! keep-alive comment, an error object inside the stream, a body that is one JSON line, a stream
//! without `[DONE]`), the drop-in must count what upstream counts.
//!
//! One line: stripped; skipped when empty (the `dynamo` backend also skips `event:` and `:`
//! lines); a leading `data: ` removed; `[DONE]` ignored; anything else must parse as a JSON
//! object, or the request fails (upstream's `json.loads` raises). A line whose `choices` holds a
//! choice is a token chunk; `usage` is read from a line without one (from any line, `dynamo`).

use super::sse::{self, ChunkInfo, Event, Malformed};

/// `--backend`: which of upstream's request functions reads the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/v1/completions` (vllm, openai, sglang, lmdeploy, scalellm): the first token chunk is the
    /// first token, the latency ends at the last one, and no token chunk fails the request.
    Completions,
    /// sa-bench's `dynamo`: completions, `event:`/`:` lines skipped, usage from any line.
    Dynamo,
    /// `openai-chat`: every line stamps the clock (the latency ends at the last one, an ITL runs
    /// from the line before), each choice must carry a `delta`, and a 200 succeeds without tokens.
    Chat,
}

/// What one line of the body is.
#[derive(Debug, PartialEq)]
pub(super) enum Line<'a> {
    /// Not a message (the `dynamo` backend's `event:` and `:` lines).
    Skip,
    /// `[DONE]`: ignored.
    Done,
    /// A JSON object, with the text of its first choice (`payload`, for the generated text).
    Json { info: ChunkInfo, payload: &'a [u8] },
}

impl Api {
    /// The meaning of one line, already stripped and not empty.
    pub(super) fn line<'a>(self, line: &'a [u8]) -> Result<Line<'a>, Malformed> {
        if self == Api::Dynamo && (line.starts_with(b"event:") || line.starts_with(b":")) {
            return Ok(Line::Skip);
        }
        // Upstream decodes the line before anything else.
        if std::str::from_utf8(line).is_err() {
            return Err(Malformed(format!(
                "a response line is not UTF-8: {}",
                sse::preview(line)
            )));
        }
        let payload = line.strip_prefix(b"data: ").unwrap_or(line);
        if payload == b"[DONE]" {
            return Ok(Line::Done);
        }
        let not_json = || {
            Malformed(format!(
                "a response line is not a JSON object: {}",
                sse::preview(payload)
            ))
        };
        // `classify` trims and knows `[DONE]`; upstream's `json.loads` takes surrounding
        // whitespace but not `[DONE]` itself.
        if payload.trim_ascii_start().first() != Some(&b'{') {
            return Err(not_json());
        }
        let info = match sse::classify(payload) {
            Ok(Event::Chunk(info)) => info,
            // An error object has neither choices nor usage: upstream passes over it.
            Ok(Event::Error(_)) => ChunkInfo::default(),
            Ok(Event::Done) | Err(_) => return Err(not_json()),
        };
        if self == Api::Chat && info.choice && !info.first_delta {
            return Err(Malformed(format!(
                "a chat response line's first choice has no delta: {}",
                sse::preview(payload)
            )));
        }
        Ok(Line::Json { info, payload })
    }

    /// Whether a line's `usage` sets the output length.
    pub(super) fn takes_usage(self, info: &ChunkInfo) -> bool {
        info.usage.is_some() && (!info.choice || self == Api::Dynamo)
    }
}

/// Upstream's message for a completions body without a token chunk, kept in its words: scripts
/// grep the errors of `--save-detailed` files.
pub(super) const NO_TOKEN_CHUNK: &str =
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!";

#[cfg(test)]
mod tests {
    use super::*;

    fn json(api: Api, line: &str) -> ChunkInfo {
        match api.line(line.as_bytes()) {
            Ok(Line::Json { info, .. }) => info,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn lines_mean_what_upstream_makes_of_them() {
        let chunk = r#"{"choices":[{"index":0,"text":"a"}]}"#;
        for api in [Api::Completions, Api::Dynamo] {
            assert!(json(api, &format!("data: {chunk}")).choice);
            // A bare JSON line (a non-streaming body) is a chunk too.
            assert!(json(api, chunk).choice);
            assert_eq!(api.line(b"data: [DONE]").unwrap(), Line::Done);
            // `data:` without the space is not removed: the JSON does not parse.
            assert!(api.line(format!("data:{chunk}").as_bytes()).is_err());
            assert!(api.line(b"data:  [DONE]").is_err());
            assert!(api.line(b"{\"choices\":").is_err());
            assert!(api.line(b"[1,2]").is_err());
            assert!(api.line(b"[]").is_err());
            assert!(api.line(b"\xff").is_err());
        }
        // Comments and SSE fields fail the request except under `dynamo`.
        for line in [": keep-alive", "event: message"] {
            assert!(Api::Completions.line(line.as_bytes()).is_err(), "{line}");
            assert!(Api::Chat.line(line.as_bytes()).is_err(), "{line}");
            assert_eq!(Api::Dynamo.line(line.as_bytes()).unwrap(), Line::Skip);
        }
        // An error object is passed over, neither a token nor usage.
        let err = json(Api::Completions, r#"data: {"error":{"message":"x"}}"#);
        assert!(!err.choice && err.usage.is_none());
    }

    #[test]
    fn chat_needs_a_delta_and_usage_comes_from_the_right_lines() {
        let delta = r#"data: {"choices":[{"index":0,"delta":{"content":""}}]}"#;
        assert!(json(Api::Chat, delta).first_delta);
        let whole = r#"{"choices":[{"index":0,"message":{"content":"x"}}],"usage":{"completion_tokens":1}}"#;
        assert!(Api::Chat.line(whole.as_bytes()).is_err());
        assert!(Api::Chat
            .line(br#"{"choices":[{"index":0,"delta":null}]}"#)
            .is_err());
        // Usage beside a choice counts only under `dynamo`.
        let both = json(Api::Completions, whole);
        assert!(!Api::Completions.takes_usage(&both) && Api::Dynamo.takes_usage(&both));
        let alone = json(
            Api::Chat,
            r#"data: {"choices":[],"usage":{"completion_tokens":3}}"#,
        );
        assert!(Api::Chat.takes_usage(&alone) && Api::Completions.takes_usage(&alone));
    }
}
