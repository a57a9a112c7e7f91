"""pytest plugin (-p fla_swap) that runs flash-linear-attention's Gated DeltaNet tests
(tests/ops/test_gdn.py, fetched from fla-org/flash-linear-attention, never committed) against
attnkit.fla: before the test modules import them, chunk_gated_delta_rule and
fused_recurrent_gated_delta_rule (and their chunk_gdn / fused_recurrent_gdn aliases) in
fla.ops.gated_delta_rule and fla.ops are replaced by attnkit's. The references the tests compare
with (naive_recurrent_gated_delta_rule, ...) stay fla-core's. Without ATTNKIT_PEER_SWAP=1 it
changes nothing (fla's own kernels: the baseline).
"""

import os

_SWAP = os.environ.get("ATTNKIT_PEER_SWAP") == "1"

if _SWAP:
    import fla.ops
    import fla.ops.gated_delta_rule as _gdr

    import attnkit.fla as _ours

    for _mod in (_gdr, fla.ops):
        _mod.chunk_gated_delta_rule = _mod.chunk_gdn = _ours.chunk_gated_delta_rule
        _mod.fused_recurrent_gated_delta_rule = _mod.fused_recurrent_gdn = (
            _ours.fused_recurrent_gated_delta_rule)


def pytest_report_header(config):
    return f"gated delta rule: {'attnkit.fla' if _SWAP else 'fla-core (not swapped)'}"
