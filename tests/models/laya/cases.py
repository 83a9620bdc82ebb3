"""Requests that cover Laya's input building: every type, 1–12 options, noul with and without
criteria and labels, object/array instructions and states, unicode, numbers, truncation."""

LONG = " ".join("The customer wrote again about invoice %d and the refund that never came." % i for i in range(120))

CASES = [
    (
        "support",
        "I was charged twice for my order. Please refund the duplicate today.",
        {
            "department": {
                "type": "choice",
                "instructions": "Which team should handle this?",
                "criteria": {"billing": "Charges and refunds", "technical": "Software problems"},
            },
            "urgency": {
                "type": "score",
                "instructions": "How urgent is the request?",
                "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
            },
            "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        },
    ),
    (
        "one-option",
        "Only one way to go.",
        {"only": {"type": "choice", "instructions": "Pick", "criteria": {"solo": None}}},
    ),
    (
        "twelve-options",
        "Route this ticket.",
        {
            "route": {
                "type": "choice",
                "instructions": "Which queue?",
                "criteria": {"q%d" % i: ("Queue number %d" % i if i % 3 else None) for i in range(12)},
            }
        },
    ),
    (
        "list-labels",
        "Pick a number.",
        {"n": {"type": "choice", "instructions": "Which?", "criteria": [1, "two", 3.5, False]}},
    ),
    (
        "empty-description",
        "x",
        {"c": {"type": "choice", "instructions": "Pick", "criteria": {"a": "", "b": 0, "c": False}}},
    ),
    (
        "structured-criteria",
        "Evaluate the contract.",
        {
            "risk": {
                "type": "choice",
                "instructions": "Risk level",
                "criteria": {"low": {"max": 10, "notes": ["ok", "fine"]}, "high": [1, 2.5, None]},
            }
        },
    ),
    ("score-2", "Rate it.", {"s": {"type": "score", "instructions": "Quality", "criteria": ["bad", "good"]}}),
    (
        "score-5-structured",
        "Rate it.",
        {
            "s": {
                "type": "score",
                "instructions": {"rubric": "quality", "scale": 5},
                "criteria": ["awful", {"level": "poor"}, "fair", ["good"], 4.5],
            }
        },
    ),
    (
        "score-10",
        "Rate it.",
        {"s": {"type": "score", "instructions": "Quality", "criteria": ["l%d" % i for i in range(10)]}},
    ),
    ("score-1", "One level only.", {"s": {"type": "score", "instructions": "Quality", "criteria": ["only"]}}),
    (
        "noul-criteria",
        "The email offers cheap watches.",
        {
            "spam": {
                "type": "noul",
                "instructions": "Is this spam?",
                "criteria": {"true": "Unsolicited advertising", "false": "A real message"},
            }
        },
    ),
    (
        "noul-one-sided",
        "Hello there.",
        {"greet": {"type": "noul", "instructions": "Is it a greeting?", "criteria": {"true": "It greets"}}},
    ),
    (
        "noul-uppercase-keys",
        "Hello there.",
        {
            "greet": {
                "type": "noul",
                "instructions": "Is it a greeting?",
                "criteria": {"TRUE": "It greets", "False": None},
            }
        },
    ),
    (
        "noul-labels",
        "The sky is blue.",
        {"fact": {"type": "noul", "instructions": "True?", "labels": {"false": "B", "true": "A"}}},
    ),
    (
        "instructions-array",
        "Shipping was slow.",
        {"q": {"type": "noul", "instructions": ["Is shipping", "mentioned?"]}},
    ),
    ("instructions-number", "5 stars", {"q": {"type": "noul", "instructions": 5}}),
    (
        "state-object",
        {
            "user": "élise",
            "order": 1234,
            "amount": 1e16,
            "tiny": 1e-05,
            "neg": -0.0,
            "nested": {"b": [1, 2, {"c": None}], "a": True},
        },
        {"q": {"type": "choice", "instructions": "What is it about?", "criteria": {"order": None, "user": None}}},
    ),
    (
        "state-array",
        [{"role": "user", "text": "my card was charged twice"}, {"role": "agent", "text": "let me check"}],
        {"q": {"type": "noul", "instructions": "Is the customer upset?"}},
    ),
    (
        "unicode",
        "注文が二重に請求されました。返金してください 🙏 — Grüße, Zoë",
        {
            "lang": {
                "type": "choice",
                "instructions": "Language?",
                "criteria": {"日本語": "Japanese", "english": "English"},
            },
            "refund": {"type": "noul", "instructions": "返金を求めていますか?"},
        },
    ),
    (
        "mask-in-text",
        "Please [MASK] the <mask> order",
        {
            "q": {
                "type": "choice",
                "instructions": "What [MASK]?",
                "criteria": {"cancel [MASK]": "stop it", "keep": None},
            }
        },
    ),
    (
        "truncated-string",
        LONG,
        {
            "q": {"type": "noul", "instructions": "Is a refund mentioned?"},
            "c": {
                "type": "choice",
                "instructions": "Topic",
                "criteria": {"invoice": None, "shipping": None, "other": None},
            },
        },
    ),
    (
        "truncated-array-keeps-tail",
        [LONG, "the newest turn says: cancel everything"],
        {"q": {"type": "noul", "instructions": "Does the latest turn cancel?"}},
    ),
    (
        "option-order",
        "Pick the middle one.",
        {
            "q": {
                "type": "choice",
                "instructions": "Which?",
                "criteria": {"a": "first", "b": "second", "c": "third"},
                "option_order": [2, 0, 1],
            }
        },
    ),
    (
        "long-options",
        "x",
        {
            "q": {
                "type": "choice",
                "instructions": "Pick",
                "criteria": {"opt%d" % i: "a very long description " * 20 for i in range(8)},
            }
        },
    ),
    (
        "many-questions",
        "Ticket: the app crashes after the update and I want my money back.",
        {
            "q%d" % i: (
                {"type": "noul", "instructions": "Question %d?" % i}
                if i % 3 == 0
                else {"type": "choice", "instructions": "Pick %d" % i, "criteria": {"x": None, "y": "why"}}
                if i % 3 == 1
                else {"type": "score", "instructions": "Rate %d" % i, "criteria": ["lo", "mid", "hi"]}
            )
            for i in range(12)
        },
    ),
]
