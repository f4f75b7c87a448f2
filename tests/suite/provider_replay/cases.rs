//! What each recorded stream of `tests/fixtures/providers/` means: the texts, thinking, tool calls
//! (name, arguments, id), token usage and request status its first request must leave in the
//! trace. Derived by reading the bytes and their `.source` notes; failed and malformed requests
//! leave no complete message (the retry gets the replay server's later answer).

use rookery::message::StopReason;

use super::harness::{Case, Txt};

/// Every case, by file name.
pub fn all() -> impl Iterator<Item = &'static Case> {
    CASES.iter().chain(super::cases_rest::CASES)
}

/// The first half, by file name (`alibaba-…` to `mistral-small-text`).
const CASES: &[Case] = &[
    Case {
        file: "alibaba-qwen-reasoning.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Long(
            816,
            "The word **\"strawberry\"** cont",
            "returns `3`).  \n\n**Answer: 3**",
        )],
        thinking: &[Txt::Long(
            3301,
            "We are asked: \"How many 'r's a",
            " 3.\n\nYes.\n\nSo final answer: 3.",
        )],
        calls: &[],
        usage: [0, 0, 1355, 1379],
    },
    Case {
        file: "alibaba-qwen-tool-call.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[(
            "weather",
            "{\"location\": \"San Francisco\"}",
            "call_eee11723464a4b9eb8cee71d",
        )],
        usage: [0, 0, 22, 317],
    },
    Case {
        file: "anthropic-compat-tool-index1.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("Reading it.")],
        thinking: &[],
        calls: &[("read_file", "{\"path\": \"a.txt\"}", "toolu_sanitized")],
        usage: [0, 0, 0, 0],
    },
    Case {
        file: "azure-model-router.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("Capital of Denmark.")],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 78, 93],
    },
    Case {
        file: "bedrock-claude-gateway-parallel-read_file.DERIVED.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact(
            "I'll run both `ls` commands in a single turn for you - one on the current directory and one on the `working_dir`.",
        )],
        thinking: &[],
        calls: &[
            (
                "read_file",
                "{\"file_path\": \"ls\"}",
                "toolu_bdrk_01RMTd7R9DzQjEEWgDwzcBsU",
            ),
            (
                "read_file",
                "{\"file_path\": \"ls working_dir\"}",
                "toolu_bdrk_016bgVTGZdpjP8ehjMWp9cWW",
            ),
        ],
        usage: [0, 0, 122, 5104],
    },
    Case {
        file: "bedrock-claude-gateway-parallel-tools.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact(
            "I'll run both `ls` commands in a single turn for you - one on the current directory and one on the `working_dir`.",
        )],
        thinking: &[],
        calls: &[
            (
                "developer__shell",
                "{\"command\": \"ls\"}",
                "toolu_bdrk_01RMTd7R9DzQjEEWgDwzcBsU",
            ),
            (
                "developer__shell",
                "{\"command\": \"ls working_dir\"}",
                "toolu_bdrk_016bgVTGZdpjP8ehjMWp9cWW",
            ),
        ],
        usage: [0, 0, 122, 5104],
    },
    Case {
        file: "deepseek-v4-reasoning.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("There are **3** “r”s in **“strawberry”**.")],
        thinking: &[Txt::Long(
            285,
            "We need answer simple. Need co",
            "two. total 3 r's. Need answer.",
        )],
        calls: &[],
        usage: [0, 0, 106, 203],
    },
    Case {
        file: "deepseek-v4-text.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Long(
            454,
            "Introducing \"Lumina's Eve,\" a ",
            "erconnectedness of all things.",
        )],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 98, 120],
    },
    Case {
        file: "deepseek-v4-tool-call.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[Txt::Exact(
            "The user asks about the weather in San Francisco. I should use the weather tool.",
        )],
        calls: &[(
            "weather",
            "{\"location\": \"San Francisco\"}",
            "call_00_IhCAliIHtM9gKpgfqbBV9873",
        )],
        usage: [256, 0, 61, 435],
    },
    Case {
        file: "envoy-gateway-gemini-text.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("1, 2, 3, 4, 5")],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 13, 21],
    },
    Case {
        file: "gemini-openai-compat-tool-call.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[(
            "glob",
            "{\"pattern\":\"*\"}",
            "function-call-18439433602034082669",
        )],
        usage: [0, 0, 12, 3459],
    },
    Case {
        file: "groq-llama-text.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Long(
            3189,
            "Introducing \"Luminaria\" - a ne",
            "iation for the magic of light.",
        )],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 662, 707],
    },
    Case {
        file: "groq-llama-tool-call.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[("weather", "{}", "tk85n1k4m")],
        usage: [0, 0, 15, 225],
    },
    Case {
        file: "groq-qwen3-reasoning.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Long(
            347,
            "The word **\"strawberry\"** is s",
            "\n**Final Answer**: $\\boxed{3}$",
        )],
        thinking: &[Txt::Long(
            2952,
            "Okay, let me try to figure out",
            "R's in \"strawberry\" is three.\n",
        )],
        calls: &[],
        usage: [0, 0, 1107, 1124],
    },
    Case {
        file: "litellm-1.108.7-mock-text.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("Hello from LiteLLM — ünïcødé ✓ 你好 🎉 done.")],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 17, 65],
    },
    Case {
        file: "litellm-1.108.7-ollama_chat-one-message.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[
            (
                "run_command",
                "{\"command\": \"ls\"}",
                "80c5254d-aa0f-400e-8593-193104365dcc",
            ),
            (
                "run_command",
                "{\"command\": \"ls -l\"}",
                "8d7a1be8-32f1-4af0-a5e9-f7d45f58d53f",
            ),
        ],
        usage: [0, 0, 81, 236],
    },
    Case {
        file: "litellm-1.108.7-ollama_chat-split-calls.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[
            (
                "run_command",
                "{\"command\": \"ls\"}",
                "037a470e-4348-4728-bd9d-14e014b2cd52",
            ),
            (
                "run_command",
                "{\"command\": \"ls -l\"}",
                "184e6e6b-6369-4ab1-adf3-3ca1a48bc941",
            ),
        ],
        usage: [0, 0, 81, 236],
    },
    Case {
        file: "litellm-1.108.7-up-bedrock-gw.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact(
            "I'll run both `ls` commands in a single turn for you - one on the current directory and one on the `working_dir`.",
        )],
        thinking: &[],
        calls: &[
            (
                "developer__shell",
                "{\"command\": \"ls\"}",
                "toolu_bdrk_01RMTd7R9DzQjEEWgDwzcBsU",
            ),
            (
                "developer__shell",
                "{\"command\": \"ls working_dir\"}",
                "toolu_bdrk_016bgVTGZdpjP8ehjMWp9cWW",
            ),
        ],
        usage: [0, 0, 122, 5104],
    },
    Case {
        file: "litellm-1.108.7-up-deepseek.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[Txt::Exact(
            "The user asks about the weather in San Francisco. I should use the weather tool.",
        )],
        calls: &[(
            "weather",
            "{\"location\": \"San Francisco\"}",
            "call_00_IhCAliIHtM9gKpgfqbBV9873",
        )],
        usage: [256, 0, 61, 435],
    },
    Case {
        file: "litellm-1.108.7-up-openai.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[],
        calls: &[
            (
                "GetWeatherArgs",
                "{\"city\": \"Edinburgh\", \"country\": \"GB\", \"units\": \"c\"}",
                "call_JMW1whyEaYG438VE1OIflxA2",
            ),
            (
                "get_stock_price",
                "{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}",
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            ),
        ],
        usage: [0, 0, 60, 209],
    },
    Case {
        file: "llamacpp-gptoss-reasoning.COMPOSITE.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[],
        thinking: &[Txt::Exact("We")],
        calls: &[],
        usage: [0, 0, 247, 1332],
    },
    Case {
        file: "llamacpp-tool-call-tail.TRUNCATED.sse",
        status: StopReason::Malformed,
        error: Some("unparseable chunk (EOF while parsing a string"),
        texts: &[],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 0, 0],
    },
    Case {
        file: "magistral-reasoning-content-array.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("2 + 2 = 4")],
        thinking: &[Txt::Exact(
            "The user is asking for 2+2. This is basic arithmetic. 2+2=4.",
        )],
        calls: &[],
        usage: [0, 0, 46, 56],
    },
    Case {
        file: "mistral-small-text.sse",
        status: StopReason::Completed,
        error: None,
        texts: &[Txt::Exact("Hello, world! This is a test response.")],
        thinking: &[],
        calls: &[],
        usage: [0, 0, 8, 21],
    },
];
