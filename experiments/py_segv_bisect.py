"""Bisects a segfault of attention calls that mix host and device arrays (run on a GPU machine
with the built package on PYTHONPATH): each case in its own process, its exit code printed."""
import subprocess
import sys

CASES = {
    "q_cuda_k_cpu": "attnkit.attention(q, q.cpu(), q)",
    "fp32_q_cuda_k_numpy": "attnkit.attention(q.float(), q.float().cpu().numpy(), q.float())",
    "batch_mismatch_all_cuda": "attnkit.attention(q, torch.cat([q, q]), torch.cat([q, q]))",
    "merge_o_cuda_lse_cpu": "attnkit.merge_states(torch.randn(2, 3, 2, 128, device='cuda'), torch.randn(2, 3, 2))",
    "gdn_decode_pool_cpu": "attnkit.gdn_decode_step(q[0, :1], q[0, :1], q[0, :1], torch.zeros(1, 2, device='cuda'), torch.ones(1, 2, device='cuda'), torch.zeros(2, 2, 128, 128), torch.zeros(1, dtype=torch.int32, device='cuda'))",
    "ok_call": "attnkit.attention(q, q, q)",
}
PRELUDE = "import torch, attnkit\nq = torch.randn(1, 4, 2, 128, device='cuda', dtype=torch.bfloat16)\n"
for name, stmt in CASES.items():
    code = PRELUDE + f"try:\n    {stmt}\n    print('returned')\nexcept Exception as e:\n    print(type(e).__name__, str(e)[:120])\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    print(f"{name}: rc={r.returncode} {r.stdout.strip()}")
