"""The deployment-precision difference beside the float32 verdict, provider-generic (here: the CPU EP)."""

from __future__ import annotations

import copy
import io

import pytest

from fuseview.runtime import samples
from fuseview.runtime.deployment import NOISE_FACTOR, deployment_check, deployment_lines
from fuseview.runtime.inputs import make_feeds


@pytest.fixture(scope="module")
def gelu():
    orig = samples.gelu_original()
    return orig, make_feeds(orig, {"batch": 2, "seq": 16})


def test_a_valid_fusion_is_within_the_originals_noise_floor(gelu):
    orig, feeds = gelu
    dep = deployment_check(orig, samples.gelu_fused(), feeds, "cpu")
    (name, d), = dep["outputs"].items()
    assert d["original"]["max_abs"] == 0.0  # the same EP and precision as the reference: no noise at all
    assert 0 < d["fused"]["max_abs"] < 1e-4  # FastGelu rounds differently, within atol
    assert dep["within_noise_floor"] is True
    assert dep["precision"] == "float32 (the provider's default)"
    assert dep["provider"]["provider"] == "CPUExecutionProvider"


def test_a_broken_fusion_is_beyond_it(gelu):
    orig, feeds = gelu
    dep = deployment_check(orig, samples.gelu_fused(bias=0.5), feeds, "cpu")
    d = next(iter(dep["outputs"].values()))
    assert d["fused"]["max_abs"] > max(NOISE_FACTOR * d["original"]["max_abs"], 1e-4)
    assert dep["within_noise_floor"] is False
    assert "BEYOND" in deployment_lines(dep)[0]


def test_the_report_carries_it_in_json_cli_and_dock(gelu):
    from fuseview.commands.profile import print_report
    from fuseview.reports import ProfileReport
    from fuseview.runtime.job import ProfileRequest, run_profile
    from fuseview.ui.profile_panel import summary_text

    orig, feeds = gelu
    rep = run_profile(ProfileRequest(orig, samples.gelu_fused(), provider="cpu", runs=2, warmup=1,
                                     threads=1, profile_runs=1, sessions=1, dims={"batch": 2, "seq": 16}))
    assert "deployment" not in rep["comparison"]  # on the CPU EP the verdict's precision is the deployed one
    with_dep = copy.deepcopy(rep)  # as a CUDA profile writes it (the provider-generic check, run here)
    with_dep["comparison"]["deployment"] = deployment_check(orig, samples.gelu_fused(), feeds, "cpu")
    typed = ProfileReport.from_json(with_dep)
    assert typed.comparison is not None and typed.comparison.extra["deployment"]["within_noise_floor"]
    out = io.StringIO()
    print_report(typed, out)
    assert "deployment precision, float32" in out.getvalue() and "noise floor" in out.getvalue()
    assert "within the original's own noise floor" in summary_text(typed.to_json())
    bad = copy.deepcopy(with_dep)
    del bad["comparison"]["deployment"]["within_noise_floor"]
    from fuseview.errors import FuseviewError

    with pytest.raises(FuseviewError, match="deployment"):
        ProfileReport.from_json(bad)
