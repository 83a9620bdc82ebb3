"""The golden contract (models.md §4.5, Open-Jev 3308a15): requests, their exact prompts, the
per-candidate logits and the expected answers, at T = 2.5343690298472983 (27B-v1.1)."""

T27 = 2.5343690298472983
P3 = [0.21343437444688138, 0.3166841593736535, 0.4698814661794651]
P2 = [0.4026163222565936, 0.5973836777434065]

_STATE = (
    "A customer says: I was charged twice for one order. The service is working normally. "
    "There is no sign of unauthorized access."
)
_CONTEXT = "Context:\n" + _STATE + "\n\nQuestion: "
_CHOICE_TAIL = "\nIs this proposed answer correct? Answer Yes or No."
_NOUL_TAIL = "Is the answer to this question yes? Answer Yes or No."
_URGENCY = [
    "Routine: no service disruption or active security compromise is reported.",
    "Urgent: an ongoing service disruption is reported.",
    "Critical: active unauthorized access is reported.",
]
_ROUTE = {
    "billing": "Problems with charges, invoices, refunds or payments.",
    "security": "Unauthorized access or account compromise.",
    "technical": "Service unavailable or a software malfunction.",
}

# Each case: (request, prompts per question, logits per question, expected answers).
# Noul logits are the complete [false, true] pair; a served noul row is its difference.
CASES = [
    (
        {
            "state": _STATE,
            "questions": {
                "route": {"type": "choice", "instructions": "Which team should handle this issue?", "criteria": _ROUTE},
                "refund_review": {"type": "noul", "instructions": "Does this message describe a duplicate charge?"},
                "urgency": {
                    "type": "score",
                    "instructions": "Assess the urgency using only the given evidence.",
                    "criteria": _URGENCY,
                },
            },
        },
        [
            [
                _CONTEXT + "Which team should handle this issue?\nProposed answer: %s: %s" % kv + _CHOICE_TAIL
                for kv in _ROUTE.items()
            ],
            [_CONTEXT + "Does this message describe a duplicate charge?\n" + _NOUL_TAIL],
            [
                _CONTEXT + "Assess the urgency using only the given evidence.\nProposed answer: " + level + _CHOICE_TAIL
                for level in _URGENCY
            ],
        ],
        [[-2.0, -1.0, 0.0], [-2.0, -1.0], [-2.0, -1.0, 0.0]],
        {
            "route": {
                "type": "choice",
                "choice": "technical",
                "probabilities": dict(zip(_ROUTE, P3)),
                "confidence": 0.20482219926919762,
            },
            "refund_review": {"type": "noul", "noul": 0.5973836777434065},
            "urgency": {
                "type": "score",
                "score": 1.2564470917325836,
                "probabilities": dict(zip("012", P3)),
                "confidence": 0.0,
                "legend": dict(zip("012", _URGENCY)),
            },
        },
    ),
    # Sorted rendering of state, instructions and criteria; the option order stays the request's.
    (
        {
            "state": {"z": [1.0, 1e16, -0.0, True, None, "猫"], "a": {"β": "z", "a": "first"}},
            "questions": {
                "kept-id": {
                    "type": "choice",
                    "instructions": {"z": 1, "a": "choose"},
                    "criteria": {"z-last": None, "a-first": ["A", {"z": 2, "a": 1}]},
                }
            },
        },
        [
            [
                'Context:\n{"a": {"a": "first", "β": "z"}, "z": [1.0, 1e+16, -0.0, true, null, "猫"]}'
                '\n\nQuestion: {"a": "choose", "z": 1}\nProposed answer: ' + option + _CHOICE_TAIL
                for option in ("z-last", 'a-first: ["A", {"a": 1, "z": 2}]')
            ]
        ],
        [[-2.0, -1.0]],
        {
            "kept-id": {
                "type": "choice",
                "choice": "a-first",
                "probabilities": {"z-last": P2[0], "a-first": P2[1]},
                "confidence": 0.194767355486813,
            }
        },
    ),
    (
        {
            "state": ["café", {"b": False, "a": 1e-05}],
            "questions": {
                "score": {"type": "score", "instructions": "Rate.", "criteria": ["low", "middle", "high"]},
                "binary": {
                    "type": "noul",
                    "instructions": ["Ready?", {"b": 2, "a": 1}],
                    "criteria": {"true": {"z": 1, "a": "yes"}, "false": ["no", "later"]},
                },
            },
        },
        [
            [
                'Context:\n["café", {"a": 1e-05, "b": false}]\n\nQuestion: Rate.\nProposed answer: '
                + level
                + _CHOICE_TAIL
                for level in ("low", "middle", "high")
            ],
            [
                'Context:\n["café", {"a": 1e-05, "b": false}]\n\nQuestion: ["Ready?", {"a": 1, "b": 2}]'
                '\nYes means: {"a": "yes", "z": 1}\nNo means: ["no", "later"]\n' + _NOUL_TAIL
            ],
        ],
        [[-2.0, -1.0, 0.0], [-2.0, -1.0]],
        {
            "score": {
                "type": "score",
                "score": 1.2564470917325836,
                "probabilities": dict(zip("012", P3)),
                "confidence": 0.0,
                "legend": {"0": "low", "1": "middle", "2": "high"},
            },
            "binary": {"type": "noul", "noul": 0.5973836777434065},
        },
    ),
    (
        {
            "model": "open-jev-27b-v1.1",
            "state": "Anything",
            "questions": {
                "one": {"type": "choice", "instructions": "Pick", "criteria": {"only": None}},
                "tie": {"type": "choice", "instructions": "Pick", "criteria": {"first": "first", "second": "second"}},
            },
        },
        [
            ["Context:\nAnything\n\nQuestion: Pick\nProposed answer: only" + _CHOICE_TAIL],
            [
                "Context:\nAnything\n\nQuestion: Pick\nProposed answer: %s: %s" % (k, k) + _CHOICE_TAIL
                for k in ("first", "second")
            ],
        ],
        [[0.0], [0.0, 0.0]],
        {
            "one": {"type": "choice", "choice": "only", "probabilities": {"only": 1.0}, "confidence": 1.0},
            "tie": {
                "type": "choice",
                "choice": "first",
                "probabilities": {"first": 0.5, "second": 0.5},
                "confidence": 0.0,
            },
        },
    ),
]


def close(actual, expected, tol: float = 1e-12) -> None:
    """Equal structure and key order; numbers within `tol`."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), (actual, expected)
        for key, value in expected.items():
            close(actual[key], value, tol)
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert isinstance(actual, float) and abs(actual - expected) < tol, (actual, expected)
    else:
        assert actual == expected, (actual, expected)
