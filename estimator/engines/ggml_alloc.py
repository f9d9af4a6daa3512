"""ggml's graph allocator, replayed: the size of the compute buffer llama.cpp reserves for a graph (bytes).

llama.cpp sizes its compute buffer by handing its worst-case graph to ggml's graph allocator
(``ggml_gallocr``) and keeping the allocator's high-water mark.  Where the allocator puts each tensor depends
on the order of the graph and on which blocks are free at that moment, so the buffer is not a sum of terms:
the same model can hold a few extra hidden rows under its logits at one context and none at another
(docs/memory-model.md §3).  Replaying the allocator over the same graph gives its figure exactly.  The rules
replayed, as ggml/src/ggml-alloc.c of the llama.cpp that llama-cpp-python 0.3.36 vendors states them
(``ggml_gallocr_alloc_graph_impl``, ``ggml_gallocr_allocate_node``, ``ggml_dyn_tallocr_alloc``,
``ggml_dyn_tallocr_free_bytes``; read, not copied):

* the graph's input leafs are allocated first, in leaf order; weights and the KV cache live in buffers of
  their own (``external``) and are never allocated here;
* every node is allocated when the walk reaches it, after its parents; a view (RESHAPE, VIEW, PERMUTE,
  TRANSPOSE, SET_ROWS into the cache) takes no memory of its own;
* an op that may run in place (``INPLACE_OPS``: ggml_op_can_inplace) reuses a parent the allocator owns
  when the parent has the node's size, no views, is not a graph output and has this node as its last
  consumer (the first such parent in source order; ggml compares type, shape and strides, where sizes
  suffice for the graphs built here: the allocator's own traces agree, tests/alloc_traces);
* after a node runs, each parent whose consumers and views are all done is freed; a view's last consumer
  releases one view of its source, and a source whose views and consumers are all done is freed; graph outputs
  are never freed;
* free blocks are kept in offset order and merged with their neighbours; an allocation takes the smallest free
  block that fits, other than the last one (ties go to the later block), else the last block, which grows the
  buffer (one chunk: a CPU buffer has no size cap); sizes are rounded up to the buffer's alignment (32 bytes,
  ggml's TENSOR_ALIGNMENT).

The buffer is the largest offset + size ever allocated.  A graph is a list of ``GgmlTensor`` leafs and
nodes in the graph's execution order (``estimator.engines.llama_cpp_graph`` builds llama.cpp's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CPU_ALIGNMENT = 32  # ggml's TENSOR_ALIGNMENT: the CPU buffer type's alignment (bytes)

# ggml_op_can_inplace (ggml-alloc.c): ops whose result may take a parent's memory
INPLACE_OPS = frozenset({
    "FILL", "SCALE", "DIAG_MASK_ZERO", "DIAG_MASK_INF", "ADD", "ADD_ID", "ADD1", "SUB", "MUL", "DIV", "SQR",
    "SQRT", "LOG", "UNARY", "ROPE", "ROPE_BACK", "SILU_BACK", "RMS_NORM", "RMS_NORM_BACK", "CLAMP",
    "SOFT_MAX", "SOFT_MAX_BACK",
})  # fmt: skip


@dataclass(eq=False)
class GgmlTensor:
    """One tensor of a graph: ``nbytes`` its size (ggml_nbytes), ``srcs`` its parents in source order,
    ``view_of`` the tensor whose memory a view uses (None: not a view).  ``external``: its data lives in
    another buffer (weights, the KV cache); ``is_input`` / ``is_output``: ggml's INPUT / OUTPUT flags.  The
    remaining fields are the allocator's state during a replay."""

    name: str
    op: str
    nbytes: int = 0
    srcs: tuple[GgmlTensor, ...] = ()
    view_of: GgmlTensor | None = None
    external: bool = False
    is_input: bool = False
    is_output: bool = False
    owned: bool = field(default=False, repr=False)  # allocated by the allocator and not handed on
    offset: int = field(default=-1, repr=False)
    n_children: int = field(default=0, repr=False)
    n_views: int = field(default=0, repr=False)


class _Blocks:
    """The free blocks of one buffer (``ggml_dyn_tallocr``): [offset, size] in offset order, the last one the
    open end of the buffer."""

    def __init__(self, alignment: int, trace: list[tuple[int, int]] | None = None) -> None:
        self.alignment = alignment
        self.free: list[list[int]] = [[0, 1 << 62]]
        self.high_water = 0
        self.trace = trace

    def _aligned(self, nbytes: int) -> int:
        return -(-nbytes // self.alignment) * self.alignment

    def alloc(self, nbytes: int) -> int:
        size = self._aligned(nbytes)
        best, best_size = len(self.free) - 1, -1
        for i, (_, s) in enumerate(self.free[:-1]):  # best fit besides the last block, ties to the later
            if s >= size and (best_size < 0 or s <= best_size):
                best, best_size = i, s
        block = self.free[best]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.free[best]
        self.high_water = max(self.high_water, offset + size)
        if self.trace is not None:
            self.trace.append((size, offset))
        return offset

    def release(self, offset: int, nbytes: int) -> None:
        size = self._aligned(nbytes)
        blocks = self.free
        for i, block in enumerate(blocks):
            if block[0] + block[1] == offset:  # ends where the freed bytes start
                block[1] += size
                if i + 1 < len(blocks) and block[0] + block[1] == blocks[i + 1][0]:
                    block[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if offset + size == block[0]:  # starts where they end
                block[0] = offset
                block[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == block[0]:
                    blocks[i - 1][1] += block[1]
                    del blocks[i]
                return
        at = 0
        while at < len(blocks) and blocks[at][0] < offset:
            at += 1
        blocks.insert(at, [offset, size])


def _allocate(blocks: _Blocks, t: GgmlTensor) -> None:
    if t.external or t.owned or t.offset >= 0 or t.view_of is not None:
        return
    if t.op in INPLACE_OPS:
        for p in t.srcs:
            if p.owned and not p.is_output and p.nbytes == t.nbytes and p.n_children == 1 and p.n_views == 0:
                t.offset, t.owned, p.owned = p.offset, True, False
                return
    t.offset, t.owned = blocks.alloc(t.nbytes), True


def _free(blocks: _Blocks, t: GgmlTensor) -> None:
    if not t.is_output:
        blocks.release(t.offset, t.nbytes)
        t.owned = False


def high_water_bytes(
    leafs: list[GgmlTensor],
    nodes: list[GgmlTensor],
    alignment: int = CPU_ALIGNMENT,
    trace: list[tuple[int, int]] | None = None,
) -> int:
    """The compute buffer (bytes) ggml's graph allocator reserves for the graph: its high-water mark over the
    walk the module docstring describes.  ``trace``, when given, receives every allocation as (aligned size,
    offset) in order, as ggml-alloc's debug trace prints them.  The tensors carry the walk's state afterwards:
    build a graph anew for every replay."""
    blocks = _Blocks(alignment, trace)
    for leaf in leafs:
        _allocate(blocks, leaf)
    for n in nodes:  # count consumers and views; explicit inputs first
        if n.view_of is not None:
            n.view_of.n_views += 1
        if n.is_input:
            _allocate(blocks, n)
        for s in n.srcs:
            s.n_children += 1
            if s.is_input:
                _allocate(blocks, s)
    for n in nodes:
        for p in n.srcs:
            _allocate(blocks, p)
        _allocate(blocks, n)
        for p in n.srcs:
            p.n_children -= 1
            if p.n_children or p.n_views:
                continue
            if p.view_of is not None:
                src = p.view_of
                src.n_views -= 1
                if not src.n_views and not src.n_children and src.owned:
                    _free(blocks, src)
            elif p.owned:
                _free(blocks, p)
    return blocks.high_water
