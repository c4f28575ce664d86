"""Programmatic launches of the persistent kernels, checked on their PTX (CPU, no GPU): nothing that
reads a kernel input, writes C, or writes a tensor map can run before griddepcontrol.wait.

A programmatic launch (launch.PackedLaunch's `programmatic`) may start while the kernel before it
in the stream still runs, and sees that kernel's writes only after griddepcontrol.wait (PTX ISA,
griddepcontrol). The wait acts per thread, so the property is one of paths: on every path from
the kernel's entry to such an instruction, the thread executed the wait. The check builds the
PTX's control-flow graph (labels, in their `{ }` scopes as inline asm declares them; `bra`, its
predicate; `ret`/`exit`) and collects every instruction reachable from the entry without passing
an unpredicated griddepcontrol.wait; that set must hold none of the forbidden instructions. It is
sound for PTX without indirect branches or calls (the check refuses both where they are
reachable before the wait). It reads the PTX; ptxas keeps memory accesses behind
griddepcontrol.wait (its purpose is to order them), which the sm_90a check also reads in the SASS
where nvdisasm is installed (ACQBULK, the wait, before any memory instruction).

sm_90a: every thread waits first, in the entry block, before any branch: the set is the
straight-line code above the wait, and it may hold register work only (parameter reads, moves,
integer arithmetic, the instrumented build's timer read), no memory access of any kind. So no
read of A, B or the scales (phase 0's plain loads, the producer's bulk copies), no store to C and
no touch of nvgg's own launch state (the launch count, the readiness counters, the fp16 copy of
A and the tensor maps the launch before may still be using) can come before it, in any build.

sm_100a: each warp that needs the kernel before waits at the top of its own role (TMA producer,
epilogue), after the prologue (barrier init, tensor-memory allocation, the schedule's reads). That
kernel reads A, B and their scales and writes C only with the copy engine, through tensor maps
(its other global loads read nvgg's schedule and tables), so the forbidden set is: bulk copies
(cp.async.bulk*, loads and stores), writes of a tensor map in global memory (tensormap.replace on
.global, tensormap.cp_fenceproxy), non-coherent loads, atomics, and global stores other than the
instrumented build's timer stamps. A host-made map's fence and prefetch may come before the wait.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

pytest.importorskip("cutlass")

from nvgg.kernels.sm90.family import config_for, wide_config  # noqa: E402
from nvgg.kernels import tools  # noqa: E402
from nvgg.kernels.sm100 import config as sm100_config, host as sm100_host  # noqa: E402
from nvgg.kernels.sm90 import config as gemm, host as sm90_host  # noqa: E402

_LABEL = re.compile(r"^([$\w]+):$")
WAIT = "griddepcontrol.wait"


def _parse(ptx: str):
    """The one kernel entry's instructions, each (text, scopes: the ids of the `{ }` blocks it sits
    in, outermost first), and its labels: (scope id, name) -> index of the instruction after it."""
    start = ptx.index("\n{", ptx.index(".entry ")) + 1
    insts, labels, stack, opened = [], {}, [], 0
    for raw in ptx[start:].splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if line == "{":
            stack.append(opened)
            opened += 1
        elif line == "}":
            stack.pop()
            if not stack:
                break
        elif _LABEL.match(line):
            labels[(stack[-1], _LABEL.match(line).group(1))] = len(insts)
        elif not line.startswith("."):  # declarations and pragmas
            insts += [(s.strip(), tuple(stack)) for s in line.split(";") if s.strip()]
    return insts, labels


def _opcode(text: str) -> tuple[bool, str, str]:
    """(predicated, opcode, operands) of one instruction."""
    predicated = text.startswith("@")
    body = text.split(None, 1)[1] if predicated else text
    op, _, operands = body.partition(" ")
    return predicated, op, operands.strip()


def _successors(i: int, insts, labels) -> list[int]:
    text, scopes = insts[i]
    predicated, op, operands = _opcode(text)
    after = [i + 1] if i + 1 < len(insts) else []
    root = op.split(".")[0]
    if root == "bra":
        name = operands.split(",")[0].strip()
        target = next((labels[(s, name)] for s in reversed(scopes) if (s, name) in labels), None)
        assert target is not None, f"no label {name!r} in scope for {text!r}"
        return [target] + after if predicated else [target]
    if root in ("ret", "exit", "trap"):
        return after if predicated else []
    assert root not in ("brx", "call"), f"control flow the check cannot follow, before the wait: {text!r}"
    return after


def before_wait(ptx: str) -> list[str]:
    """Every instruction some thread can execute before it has executed griddepcontrol.wait, in
    program order (the waits themselves left out)."""
    insts, labels = _parse(ptx)
    seen, todo = set(), [0]
    while todo:
        i = todo.pop()
        if i in seen or i >= len(insts):
            continue
        seen.add(i)
        if insts[i][0] != WAIT:  # an unpredicated wait ends the path's unsafe part
            todo += _successors(i, insts, labels)
    return [insts[i][0] for i in sorted(seen) if insts[i][0] != WAIT]


def test_the_path_check_follows_branches_scopes_and_predicates():
    ptx = """.visible .entry k(
)
{
\t.reg .pred %p<3>;
\tld.param.b64 %rd1, [k_param_0];
\t@%p1 bra $L__BB0_2;
\tgriddepcontrol.wait;
\tld.global.b32 %r1, [%rd1];
$L__BB0_2:
\t{
\t.reg .pred P1;
\tLAB_WAIT:
\tmbarrier.try_wait.parity.shared.b64 P1, [%r2], %r3, 1000;
\t@P1 bra.uni DONE;
\tbra.uni LAB_WAIT;
\tDONE:
\t}
\t@%p2 griddepcontrol.wait;
\tcp.async.bulk.tensor.2d.shared::cluster.global [%r4], [%rd2, {%r5, %r6}], [%r7];
\tret;
}
"""
    # the branch skips the first wait, a predicated wait protects nothing, the asm's scoped loop
    # is followed; the load after the only wait on its path is safe
    assert before_wait(ptx) == [
        "ld.param.b64 %rd1, [k_param_0]", "@%p1 bra $L__BB0_2",
        "mbarrier.try_wait.parity.shared.b64 P1, [%r2], %r3, 1000", "@P1 bra.uni DONE", "bra.uni LAB_WAIT",
        "@%p2 griddepcontrol.wait", "cp.async.bulk.tensor.2d.shared::cluster.global [%r4], [%rd2, {%r5, %r6}], [%r7]",
        "ret"]
    waited_first = ptx.replace("\t@%p1 bra $L__BB0_2;\n\tgriddepcontrol.wait;\n", "\tgriddepcontrol.wait;\n\t@%p1 bra $L__BB0_2;\n")
    assert before_wait(waited_first) == ["ld.param.b64 %rd1, [k_param_0]"]


# --- sm_90a: one wait, first ------------------------------------------------------------------------

def _sm90_builds() -> list[gemm.GemmConfig]:
    """Every persistent sm_90a build the backend makes: the plain and wide-tile builds of the
    128-row tile in both map modes, both waits, timed and instrumented; the 64- and 32-row tiles'
    default build."""
    bases = [config_for([128], persistent=True), wide_config(config_for([128], persistent=True))]
    builds = [replace(b, tensormaps=mode, readiness=wait, instrument=instrument) for b in bases
              for mode in gemm.TENSORMAP_MODES for wait in gemm.READINESS for instrument in (False, True)]
    return builds + [config_for([m], persistent=True) for m in (64, 32)]


# register work only: what may run before the wait (the timer read is a `mov` from %globaltimer)
REGISTER_ONLY = ("ld.param", "mov", "shfl", "cvt", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                 "not", "setp", "selp", "neg", "min", "max")


@pytest.mark.parametrize("config", _sm90_builds(), ids=lambda c: sm90_host.kernel_name(c, None))
def test_sm90_every_thread_waits_before_it_touches_memory(config):
    entry = sm90_host.compile_gemm(config, None, "sm_90a", need_callable=False)
    ptx = (entry.directory / "kernel.ptx").read_text()
    insts, _ = _parse(ptx)
    first = [text for text, _ in insts].index(WAIT)
    early = before_wait(ptx)
    # the wait is in the entry block: what can run before it is exactly the code above it
    assert early == [text for text, _ in insts[:first]]
    touching = [t for t in early if not _opcode(t)[1].startswith(REGISTER_ONLY) or _opcode(t)[1].startswith("bra")]
    assert touching == []
    assert ("mov.u64" in " ".join(early) and "%globaltimer" in " ".join(early)) == config.instrument
    # every global access, bulk copy and map use of the kernel is after it
    after = [text for text, _ in insts[first + 1:]]
    for needle in ("ld.global.nc.v4.b32", "cp.async.bulk.tensor.2d", "st.global.b32"):
        assert any(needle in t for t in after)
    # and ptxas kept it so: in the SASS the wait (ACQBULK) comes before any memory instruction but
    # the parameter reads from the constant bank (needs nvdisasm)
    sass = tools.sass(entry.directory / "kernel.cubin")
    if sass is not None:
        ops = tools.opcodes(sass.read_text())
        early_ops = ops[:ops.index("ACQBULK")]
        memory = ("LD", "ST", "ATOM", "RED", "UTMA", "UBLKCP", "SYNCS", "CCTL", "BAR", "MEMBAR")
        assert [op for op in early_ops if op.startswith(memory) and not op.startswith(("LDC", "ULDC"))] == []


# --- sm_100a: a wait at the top of each role that needs the kernel before ------------------------

def _stamps(ptx: str) -> set[str]:
    """Registers that hold a %globaltimer reading (the instrumented build's stamps)."""
    return set(re.findall(r"mov\.u64\s+(%rd\d+),\s*%globaltimer", ptx))


def _forbidden_sm100(text: str, stamps: set[str]) -> bool:
    _, op, operands = _opcode(text)
    if op.startswith(("cp.async.bulk", "tensormap.cp_fenceproxy", "ld.global.nc", "red.", "atom.")):
        return True
    if op.startswith("tensormap.replace") and ".global." in op:
        return True
    if op.startswith("st.global"):
        return operands.rsplit(",", 1)[-1].strip() not in stamps
    return False


PERSISTENT_SM100 = [sm100_host.with_mode(c, mode, instrument) for c in sm100_host.CONFIGS
                    for mode in sm100_config.TENSORMAP_MODES for instrument in (False, True)]


@pytest.mark.parametrize("config", PERSISTENT_SM100, ids=lambda c: sm100_host.kernel_name(c))
def test_sm100_nothing_reads_inputs_or_writes_maps_before_the_wait(config):
    ptx = (sm100_host.compile_gemm(config, need_callable=False).directory / "kernel.ptx").read_text()
    stamps = _stamps(ptx)
    early = before_wait(ptx)
    assert [t for t in early if _forbidden_sm100(t, stamps)] == []
    # the check has teeth: the kernel does copy, write C and (device mode) write maps, after the wait
    insts = [text for text, _ in _parse(ptx)[0]]
    assert sum(_forbidden_sm100(t, stamps) for t in insts) > 0
    assert any(t.startswith("cp.async.bulk.tensor") and "global.shared::cta" in t for t in insts)  # C
    if config.instrument:
        assert any(t.startswith("st.global") for t in early)  # stamps before the wait are allowed
