import io
import subprocess
import sys

from skgpstruct.cli import demo, main


def test_demo_reports_crf_beating_per_token_model():
    buf = io.StringIO()
    errors = demo(n_sequences=120, n_classes=4, n_features=10, random_state=0, out=buf)
    text = buf.getvalue()
    assert "linear-chain CRF" in text and "logistic regression" in text
    crf = errors["linear-chain CRF (exact, L-BFGS, Viterbi)"]
    assert crf < errors["per-token logistic regression"]
    gp = errors["GPStructTagger (30 inducing points, L-BFGS)"]
    assert gp < errors["per-token logistic regression"]
    assert all(0 <= e <= 100 for e in errors.values())


def test_main_runs_demo(capsys):
    assert main(["demo", "--n-sequences", "40", "--n-classes", "3"]) == 0
    assert "token error" in capsys.readouterr().out


def test_module_entry_point_help():
    res = subprocess.run(
        [sys.executable, "-m", "skgpstruct", "--help"], capture_output=True, text=True
    )
    assert res.returncode == 0 and "demo" in res.stdout
