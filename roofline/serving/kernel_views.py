"""Views without reference counts for the compiled record loops' hot state (numba intrinsic).

numba's runtime (NRT) counts references on every array it binds to a name or passes to a function it did not
inline: an atomic increment and decrement through `NRT_incref` / `NRT_decref` (numba/core/runtime/nrtdynmod.py,
numba 0.68: each returns at once when the array's `meminfo` pointer is null, else does an atomic add). In a fleet's
loop under speculative decoding that was ~30 % of the CPU samples (perf record of `bench_serving_scale.py fleet 32
5000 --engine vllm --speculative eagle:3:0.7`: two addresses of numba's JIT code, the atomic add and subtract, 15 %
each), since each verify step is an engine record and each record passes ~40 arrays to the scheduler's functions.

`borrowed(x)` gives the same value with every array's (and a numpy Generator's) `meminfo` and `parent` set to null,
as numba's own `carray` views of a raw pointer have them: the counts become the null test. The values are the same
memory, so every read and write is the same; a view keeps nothing alive, so it is only used inside a call whose
caller holds the owning arrays (serving.kernel_loop.run_loop holds them across serving.kernel_loop's `events`) and
never returned or stored in an array that outlives it.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _strippable(ty) -> bool:
    """Whether `_strip` handles a value of type `ty`: arrays, numpy Generators, tuples of those, and values numba
    counts no references for (numbers, booleans, first-class functions)."""
    if isinstance(ty, types.Array | types.NumPyRandomGeneratorType):
        return True
    if isinstance(ty, types.BaseTuple):
        return all(_strippable(t) for t in ty)
    return isinstance(ty, types.Number | types.Boolean | types.FunctionType)


def _strip(context, builder, ty, value):
    """`value` with its arrays' and Generators' meminfo and parent pointers null (tuples element by element)."""
    if isinstance(ty, types.Array | types.NumPyRandomGeneratorType):
        proxy = cgutils.create_struct_proxy(ty)(context, builder, value=value)
        proxy.meminfo = cgutils.get_null_value(proxy.meminfo.type)
        proxy.parent = cgutils.get_null_value(proxy.parent.type)
        return proxy._getvalue()
    if isinstance(ty, types.BaseTuple):
        out = cgutils.get_null_value(context.get_value_type(ty))
        for k, item in enumerate(ty):
            out = builder.insert_value(out, _strip(context, builder, item, builder.extract_value(value, k)), k)
        return out
    return value


@intrinsic
def borrowed(typingctx, value):
    """`value` (an array, a numpy Generator, or a tuple of them and plain numbers / functions) as a view numba counts
    no references for: the same data, shape and strides with a null meminfo (see the module's docstring for when
    that is safe)."""
    if not _strippable(value):
        return None

    def codegen(context, builder, signature, args):
        return _strip(context, builder, value, args[0])

    return value(value), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """Ask for the cache line of element `index` of a C-contiguous `array` (flat index) ahead of its use: LLVM's
    llvm.prefetch (read, high locality), a hint that changes no value. A loop that visits ~90 sequences and reads
    one line each from a table too large for the caches (a leaf's slot in serving.kernel_prefix, a decode row in
    serving.kernel_block) issues the loads one iteration at a time; a first pass of prefetches lets their misses
    overlap."""
    if not (isinstance(array, types.Array) and array.layout == "C" and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(array)(context, builder, args[0]).data
        byte = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(builder.gep(data, [args[1]]), byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, index), codegen
