"""Open-Jev 9B and 27B-v1.1: a merged-LoRA Qwen3.5 backbone scoring one independent Yes/No
prompt per candidate with a learned scalar head, calibrated per question (models.md §4).

`checkpoint` knows the upstream package and the merged-export metadata, `prepare` turns a
request into candidate token rows, `finish` turns their last hidden states into answers.
"""
