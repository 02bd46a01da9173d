"""Inductor's wrapper code read as text: the launches of `call`, and each estimated op's
kernel; never executed, and any bytes are read without an error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mapreport.ingest.inductor_code import planned_ops, read_wrapper

CPU_CODE = b"""
cpp_fused_gelu_view_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* in_out_ptr0)
{
  aot_inductor::RAIIAtenRecordFunctionHandle r_("graph_0_cpp_fused_gelu_view_0", nullptr);
}
\'\'\')

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        args.clear()
        assert_size_stride(arg1_1, (1024, ), (1, ), 'input')
        buf0 = empty_strided_cpu((32, 1024), (1024, 1), torch.float32)
        extern_kernels.addmm(arg1_1, arg0_1, alpha=1, beta=1, out=buf0)
        buf1 = reinterpret_tensor(buf0, (1, 32, 1024), (32768, 1024, 1), 0); del buf0  # reuse
        cpp_fused_gelu_view_0(buf1)
        extern_kernels.addmm(arg1_1, buf1, alpha=1, beta=1, out=buf2)
        return (buf1, )

runner = Runner(partitions=[])
"""


def test_cpu_graph_ops_get_the_names_the_profiler_records() -> None:
    """A library op on a CPU graph is its aten op; a CPU kernel built with kernel profiling
    records itself as `graph_<n>_<kernel>`; an op listed twice is two ops."""
    ops = planned_ops(
        ["extern_kernels.addmm", "op1", "op2_op3", "extern_kernels.addmm"], read_wrapper(CPU_CODE)
    )
    assert [(o.op, o.kernel, o.fused) for o in ops] == [
        ("extern_kernels.addmm#1", "aten::addmm", ()),
        ("op1", "graph_0_cpp_fused_gelu_view_0", ()),
        # the next launch is a library call: this node launched nothing of its own
        ("op2_op3", None, ("op2", "op3")),
        ("extern_kernels.addmm#2", "aten::addmm", ()),
    ]


def test_without_code_ops_keep_their_names_and_have_no_kernel() -> None:
    ops = planned_ops(["op1", "op1"], None)
    assert [(o.op, o.kernel) for o in ops] == [("op1#1", None), ("op1#2", None)]


def test_code_after_call_is_not_read() -> None:
    """The function ends where its indentation does: later calls are not launches."""
    code = b"def call(args):\n    triton_a_0.run(buf0)\nprint_performance(fn)\n"
    assert [x.callee for x in read_wrapper(code).launches] == ["triton_a_0"]


@given(
    st.binary(max_size=4000),
    st.lists(st.sampled_from(["op1", "op2_op3", "extern_kernels.mm", "x"]), max_size=8),
)
def test_any_bytes_read_without_error(code: bytes, names: list[str]) -> None:
    """Arbitrary bytes (a damaged or hostile payload) give some launches or none, and every
    estimated op one row with a name unique in its graph."""
    ops = planned_ops(names, read_wrapper(b"def call(args):\n" + code))
    assert len(ops) == len(names)
    assert len({o.op for o in ops}) == len(names)


def test_a_long_line_is_read_in_linear_time() -> None:
    """A 4 MB line of one call's arguments: the bounded patterns do not backtrack."""
    code = b"def call(args):\n    triton_a_0.run(" + b"buf0, " * 700_000 + b")\n"
    assert [x.callee for x in read_wrapper(code).launches] == ["triton_a_0"]
