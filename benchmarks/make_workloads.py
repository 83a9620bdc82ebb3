"""Write the JSONL workloads the load generator sends (deterministic).

    python -m benchmarks.make_workloads
"""
from __future__ import annotations

import json
import os
import random

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")
TICKETS = [
    "I was charged twice for my order. Please refund the duplicate today.",
    "The app crashes every time I open the settings page after the update.",
    "Can you change the delivery address on order 5531 to my office?",
    "My password reset email never arrives, I checked the spam folder too.",
    "The invoice total does not match the quote you sent last week.",
    "I love the new dashboard, thanks for the quick fix on exports!",
    "Cancel my subscription effective immediately and confirm by email.",
    "Shipping took three weeks and the box arrived damaged and wet.",
]


def laya_requests(n: int, questions: int, seed: int, long_state: bool = False) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        state = rng.choice(TICKETS)
        if long_state:
            state = " ".join(rng.choice(TICKETS) for _ in range(8))
        qs = {
            "department": {"type": "choice", "instructions": "Which team should handle this?",
                           "criteria": {"billing": "Charges and refunds", "technical": "Software problems",
                                        "logistics": "Shipping and delivery"}},
            "urgency": {"type": "score", "instructions": "How urgent is the request?",
                        "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"]},
            "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        }
        keys = list(qs)[:questions]
        out.append({"model": "english", "state": state, "questions": {k: qs[k] for k in keys}})
    return out


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    sets = {"laya_1q.jsonl": laya_requests(64, 1, 1), "laya_3q.jsonl": laya_requests(64, 3, 2, long_state=True)}
    for name, rows in sets.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(name, len(rows))


if __name__ == "__main__":
    main()
