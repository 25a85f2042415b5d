//! Golden curves: every committed fixture loads, and curve selection reproduces each test vector
//! of the InferenceX contract §2.3.

use std::path::{Path, PathBuf};

use specperf::golden::{
    parse_draft_len, CurveQuery, GoldenCurve, GoldenError, GoldenSource, GoldenValue, ThinkingMode,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

fn select(
    prefix: &str,
    method: &str,
    draft_model: Option<&str>,
    sampling: Option<&str>,
    thinking: ThinkingMode,
    k: u32,
) -> Result<GoldenValue, GoldenError> {
    let src = GoldenSource::open(golden_dir()).expect("fixture dir exists");
    let q = CurveQuery {
        model_prefix: prefix,
        method,
        draft_model,
        draft_sample_method: sampling,
    };
    src.select(&q, thinking, k)
}

fn ok(r: Result<GoldenValue, GoldenError>, curve: &str, al: f64) {
    let v = r.unwrap_or_else(|e| panic!("expected {curve} -> {al}, got error {e}"));
    assert_eq!(v.curve.name, curve);
    assert_eq!(v.al, al, "{curve}");
}

fn err(r: Result<GoldenValue, GoldenError>, starts: &str) -> GoldenError {
    let e = r.expect_err("expected an error");
    assert!(e.to_string().starts_with(starts), "{e}");
    e
}

use ThinkingMode::{Off, On};

#[test]
fn contract_section_2_3_vectors() {
    ok(select("dsv4", "mtp", None, None, On, 3), "dsv4_mtp", 2.49);
    ok(select("dsv4", "EAGLE", None, None, On, 3), "dsv4_mtp", 2.49);
    ok(select("dsv4", "mtp", None, None, Off, 3), "dsv4_mtp", 2.97);
    ok(
        select("dsv4dspark", "dspark", None, None, On, 6),
        "dsv4-pro-0813-dspark",
        3.77,
    );
    let e = err(
        select("dsv4", "mtp", None, None, On, 9),
        "No golden acceptance for dsv4_mtp/thinking_on/9 draft tokens",
    );
    assert!(e.is_no_golden() && e.is_missing());
    let e = err(
        select("dsv4", "mtp", None, None, On, 0),
        "Invalid draft length 0",
    );
    assert!(e.is_invalid_golden());
    let e = parse_draft_len("true").expect_err("bool is not a draft length");
    assert!(
        e.to_string().starts_with("Invalid draft length true"),
        "{e}"
    );
    ok(
        select("kimik3", "dspark", None, Some("probabilistic"), On, 8),
        "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method",
        4.00,
    );
    ok(
        select("kimik3", "dspark", None, Some("greedy"), On, 8),
        "kimik3_dspark",
        3.88,
    );
    err(
        select("kimik3", "dspark", None, None, On, 8),
        "No Kimi DSpark golden curve for draft sampling <absent>",
    );
    ok(
        select(
            "minimaxm3",
            "eagle3",
            Some("Inferact/MiniMax-M3-EAGLE3-GQA"),
            None,
            On,
            3,
        ),
        "minimaxm3_eagle3_gqa",
        2.78,
    );
    ok(
        select("kimik2.5", "eagle", None, None, On, 4),
        "kimik2.5_eagle3",
        3.24,
    );
    ok(
        select("qwen3.5", "NEXTN", None, None, Off, 8),
        "qwen3.5_mtp",
        4.71,
    );
    err(
        select("glm5.2", "eagle", None, None, Off, 1),
        "No golden acceptance for glm5.2_mtp/thinking_off/1 draft tokens",
    );
    let e = err(
        select("dsr1", "mtp", None, None, On, 1),
        "No committed golden curve for dsr1/mtp: ",
    );
    assert!(e.to_string().contains("dsr1_mtp.yaml"), "{e}");
    assert!(e.is_missing());
}

#[test]
fn every_committed_curve_loads_with_its_model_key() {
    let curves = GoldenSource::open(golden_dir())
        .unwrap()
        .load_all()
        .unwrap();
    let keys: Vec<(&str, &str)> = curves
        .iter()
        .map(|c| (c.name.as_str(), c.model_key.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("dsv4-pro-0813-dspark", "deepseek-v4-pro-0813"),
            ("dsv4_mtp", "deepseek-v4-pro"),
            ("glm5.2_mtp", "glm-5.2-fp8"),
            ("kimik2.5_eagle3", "kimi-k2.5-nvfp4"),
            ("kimik3_dspark", "kimi-k3"),
            (
                "kimik3_dspark_probabilistic_sample_method_block_rejection_sample_method",
                "kimi-k3"
            ),
            ("minimaxm3_eagle3", "minimax-m3"),
            ("minimaxm3_eagle3_gqa", "minimax-m3"),
            ("qwen3.5_mtp", "qwen3.5-397b-a17b-nvfp4"),
        ]
    );
    for c in &curves {
        assert!(
            c.collection.is_none(),
            "{} predates the collection block",
            c.name
        );
        assert_eq!(
            c.draft_lengths(On),
            (1..=8).collect::<Vec<_>>(),
            "{}",
            c.name
        );
    }
    let glm = curves.iter().find(|c| c.name == "glm5.2_mtp").unwrap();
    assert!(!glm.has_mode(Off));
}

#[test]
fn a_single_curve_file_serves_only_its_own_curve() {
    let file = golden_dir().join("dsv4_mtp.yaml");
    let src = GoldenSource::open(&file).unwrap();
    let q = CurveQuery {
        model_prefix: "dsv4",
        method: "mtp",
        ..CurveQuery::default()
    };
    assert_eq!(src.select(&q, On, 2).unwrap().al, 2.27);
    let q = CurveQuery {
        model_prefix: "kimik2.5",
        method: "eagle",
        ..CurveQuery::default()
    };
    let e = src.select(&q, On, 2).unwrap_err();
    assert!(
        e.to_string()
            .contains("holds curve dsv4_mtp, but the deployment selects kimik2.5_eagle3"),
        "{e}"
    );
    assert!(GoldenSource::open(golden_dir().join("nope")).is_err());
}

#[test]
fn a_curve_file_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x_mtp.yaml");
    std::fs::write(
        &f,
        "a:\n  thinking_on:\n    1: 1.5\nb:\n  thinking_on:\n    1: 1.5\n",
    )
    .unwrap();
    let e = GoldenCurve::load(&f).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "Expected one model in golden curve {}",
            f.display()
        )),
        "{e}"
    );
    std::fs::write(&f, "a:\n  thinking_on: [1\n").unwrap();
    let e = GoldenCurve::load(&f).unwrap_err();
    assert!(
        e.to_string().contains("x_mtp.yaml") && e.to_string().contains("unparseable YAML"),
        "{e}"
    );
}
