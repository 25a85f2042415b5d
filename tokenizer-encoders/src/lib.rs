//! Prompt encoders for specperf: pure functions from chat messages and options to the exact prompt
//! string a server would build, plus token counting from a local `tokenizer.json`.
//!
//! This crate is the seam the renderer (`specperf::render`) calls. The DeepSeek-V4/V4.1 ports and
//! the Hugging Face chat-template renderer land here; until then it offers the one encoder every
//! model shares, the identity on a plain prompt.

/// Which client-side renderer turns a sample's first user turn into the wire prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renderer {
    /// Send the text as written (no template): `/v1/completions` `prompt` or a chat message.
    Raw,
}

/// Renders one user turn with `renderer`.
pub fn render_user_turn(renderer: Renderer, text: &str) -> String {
    match renderer {
        Renderer::Raw => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_renderer_keeps_text_byte_exact() {
        let text = "héllo\n<｜User｜> x ";
        assert_eq!(render_user_turn(Renderer::Raw, text), text);
    }
}
