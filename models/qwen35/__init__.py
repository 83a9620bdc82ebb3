"""The Qwen3.5 hybrid backbone (Gated DeltaNet + gated full attention), shared by Cua-S1,
Open-Jev and Clef-Flash: its dimensions, weights, random checkpoints, torch graph and ONNX export."""
