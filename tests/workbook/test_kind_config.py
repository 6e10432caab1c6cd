"""deploy/kind.yaml's worker labels and taints are ones the chapters, labs or minisched's default
plugins actually use: a key nothing reads is a stale promise to students."""

from __future__ import annotations

from pathlib import Path

from minisched.workbook import KIND_CONFIG, kind_baseline

ROOT = Path(__file__).resolve().parents[2]


def _corpus() -> str:
    files = [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("labs/**/*.py"), *ROOT.glob("minisched/scheduler/**/*.py")]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def test_every_kind_label_and_taint_is_used() -> None:
    baseline = kind_baseline(KIND_CONFIG)
    assert len(baseline) == 3
    corpus = _corpus()
    keys = {k for node in baseline.values() for k in node["labels"]} | \
        {t["key"] for node in baseline.values() for t in node["taints"]}
    unused = sorted(k for k in keys if k not in corpus)
    assert not unused, f"deploy/kind.yaml carries keys no chapter, lab or plugin reads: {unused}"
    values = {v for node in baseline.values() for v in node["labels"].values()}
    assert {"spot", "prod", "staging", "g4dn.xlarge"} <= values
