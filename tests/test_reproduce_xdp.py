"""xdp2018's CPU curves (Fig. 4) hold because of the clock: the Linux drop path, predicted
with the interrupt cost fitted on XDP, is within 10% of the paper at light and mid load
with intel_pstate's clock ([cpu.freq]), and far off at a fixed 3.6 GHz."""

from pktsim.reproduce import paper_xdp as px
from pktsim.sim import run

T_IRQ_NS = 1647.0  # fitted on XDP at 1 and 10 Mpps (`pktsim reproduce xdp2018`, fits.t_irq_ns)


def _linux_cpu(mpps: float, governor: bool) -> float:
    t_linux = 1e3 / px.DROP_LINUX[1] - px.poll_share_ns()
    path = px.paths(1e3 / px.DROP_XDP[1], 0.0, 0.0, t_linux)["linux"]
    node = px.node(path["xdp"], 1, f"{mpps}Mpps", T_IRQ_NS, path["t_proc_ns"])
    if not governor:
        node["cpu"].pop("freq")
    r = run(node)
    return 100 * r["cpu_utilization"], r["cpu_freq_hz"]


def test_linux_cpu_follows_the_paper_with_the_governor_and_not_without():
    for mpps in (0.25, 1, 3):
        cpu, f = _linux_cpu(mpps, True)
        assert abs(cpu / px.CPU_LINUX[mpps] - 1) < 0.10, (mpps, cpu, f)
        assert f < 3.6e9
    fixed, f = _linux_cpu(0.25, False)
    assert f == 3.6e9 and fixed / px.CPU_LINUX[0.25] - 1 < -0.25, fixed


def test_the_fit_is_on_two_loads_and_its_rows_say_so():
    assert len(px.CPU_FIT_AT) == 2
    assert all(m in px.CPU_XDP for m in px.CPU_FIT_AT)
