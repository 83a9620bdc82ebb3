"""benchmarks.host_facts: what it reads of /proc is read right, and a run on this machine records
this machine."""

from __future__ import annotations

import json
import os

from benchmarks import host_facts

STAT_BEFORE = "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 17 0 0\nintr 1\n"
STAT_AFTER = "cpu  160 0 70 900 10 0 5 55 0 0\ncpu0 80 0 35 450 5 0 2 27 0 0\nintr 2\n"


def test_steal_and_busy_are_shares_of_all_cores_time():
    before, after = host_facts.cpu_times(STAT_BEFORE), host_facts.cpu_times(STAT_AFTER)
    assert before == [100, 0, 50, 800, 10, 0, 5, 35]
    # 200 ticks: 60 user + 20 system busy, 100 idle, 20 stolen.
    assert host_facts.shares(before, after) == {"steal_pct": 10.0, "busy_pct": 40.0}
    assert host_facts.shares(after, after) == {"steal_pct": 0.0, "busy_pct": 0.0}


def test_cpuinfo_gives_the_first_model_the_mean_clock_and_the_hypervisor_flag():
    info = (
        "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\ncpu MHz\t\t: 2000.000\nflags\t\t: fpu sse hypervisor\n\n"
        "processor\t: 1\nmodel name\t: Some CPU @ 2.0GHz\ncpu MHz\t\t: 3000.000\nflags\t\t: fpu sse hypervisor\n"
    )
    cpu = host_facts.cpu_facts(info)
    assert cpu["model"] == "Some CPU @ 2.0GHz"
    assert cpu["mhz_mean"] == 2500.0
    assert cpu["hypervisor"] is True
    assert cpu["logical_cores"] == os.cpu_count()
    assert not host_facts.cpu_facts(info.replace(" hypervisor", ""))["hypervisor"]


def test_a_run_records_this_machine(tmp_path, capsys):
    out = tmp_path / "host.json"
    host_facts.main(["--out", str(out), "--window-s", "0.2"])
    found = json.loads(out.read_text())
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    assert found["cpu"]["model"] == (models[0] if models else found["cpu"]["model"])
    assert found["cpu"]["usable_cores"] == len(os.sched_getaffinity(0))
    assert 0.0 <= found["window"]["steal_pct"] <= 100.0 and 0.0 <= found["window"]["busy_pct"] <= 100.0
    probe = found["python_probe"]
    assert probe["samples"] > 0 and probe["json_roundtrip_us"] > 0 and probe["int_loop_2000_us"] > 0
    import numpy

    assert found["versions"]["numpy"] == numpy.__version__
    gpus = found["gpus"]
    assert (isinstance(gpus, list) and gpus and gpus[0]["name"]) or "absent" in gpus
    assert capsys.readouterr().out.startswith("host: ")
