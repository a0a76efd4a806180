#include <catch2/catch.hpp>

#include "core/error.h"
#include "models/chat_harmony.h"
#include "models/chat_template.h"
#include "models/gguf_file.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::models;

namespace {
ChatTemplate detect(const std::string& tmpl) {
    test::GgufWriter w;
    w.kv_string("tokenizer.chat_template", tmpl);
    auto p = test::temp_path("tmpl.gguf");
    w.write(p);
    return ChatTemplate::from_gguf(GgufFile::open(p));
}
}  // namespace

TEST_CASE("chat template families are detected from the GGUF template text", "[unit][chat]") {
    CHECK(detect("{{'<|im_start|>' + message['role']}}").family() == ChatFamily::ChatML);
    CHECK(detect("<|start_header_id|>{{ role }}<|end_header_id|>").family() == ChatFamily::Llama3);
    CHECK(detect("{{ bos_token + '[INST] ' + content + ' [/INST]' }}").family() == ChatFamily::Llama2);
    CHECK(detect("<|user|>\n{{ content }}</s>").family() == ChatFamily::Zephyr);
    CHECK(detect("<start_of_turn>user").family() == ChatFamily::Gemma);
    CHECK(detect("<|im_start|>assistant\n<think>\n' + reasoning + '\n</think>").family() == ChatFamily::Qwen3);
    CHECK(detect("{{'<|user|>\n' + message['content'] + '<|end|>\n'}}").family() == ChatFamily::Phi3);
    CHECK(detect("{{ 'Assistant: ' + message['content'] + eos_token }}").family() == ChatFamily::DeepSeek2);
    CHECK(detect("{{'<\xef\xbd\x9cUser\xef\xbd\x9c>' + c}}{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>'}}").family() ==
          ChatFamily::DeepSeek3);
    CHECK(detect("<\xef\xbd\x9cUser\xef\xbd\x9c><\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\\n").family() == ChatFamily::DeepSeekR1);
    CHECK(detect("{{- \"<|start|>user<|message|>\" + message.content + \"<|end|>\" }}<|channel|>").family() == ChatFamily::Harmony);
    CHECK(detect("something else entirely").family() == ChatFamily::ChatML);  // fallback, with a warning
}

TEST_CASE("deepseek families render DeepSeek's formats (V2's template as llama.cpp's test keeps it)", "[unit][chat]") {
    const std::string user = "<\xef\xbd\x9cUser\xef\xbd\x9c>", assistant = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
                      end = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    const std::vector<ChatMessage> chat = {{"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "Hi there"},
                                           {"user", "Who are you"}, {"assistant", "   I am an assistant   "}, {"user", "Another question"}};
    CHECK(ChatTemplate(ChatFamily::DeepSeek2).render(chat) ==
          "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there" + end +
              "User: Who are you\n\nAssistant:    I am an assistant   " + end + "User: Another question\n\nAssistant:");
    CHECK(ChatTemplate(ChatFamily::DeepSeek3).render({{"system", "S1"}, {"user", "Q"}, {"assistant", "<think>R</think>A"}, {"system", "S2"}, {"user", "Q2"}}) ==
          "S1\n\nS2" + user + "Q" + assistant + "A" + end + user + "Q2" + assistant);
    CHECK(ChatTemplate(ChatFamily::DeepSeekR1).render({{"user", "Q"}}) == user + "Q" + assistant + "<think>\n");
    CHECK(ChatTemplate(ChatFamily::DeepSeek3).end_of_turn() == end);
}

TEST_CASE("harmony: system, developer instructions, final-channel answers, the assistant's turn opened", "[unit][chat]") {
    const std::string system =
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
        "Current date: 2026-01-02\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be "
        "included for every message.<|end|>";
    CHECK(render_harmony({{"user", "Hi"}}, true, "medium", "2026-01-02") == system + "<|start|>user<|message|>Hi<|end|><|start|>assistant");
    // An answer written with its channels keeps only the final one; the last turn of a training
    // conversation ends in <|return|>.
    const std::string answer = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>";
    CHECK(render_harmony({{"system", "Be brief"}, {"user", "Hi"}, {"assistant", answer}}, false, "medium", "2026-01-02") ==
          system + "<|start|>developer<|message|># Instructions\n\nBe brief\n\n<|end|><|start|>user<|message|>Hi<|end|>"
                   "<|start|>assistant<|channel|>final<|message|>Hello<|return|>");
    CHECK(ChatTemplate(ChatFamily::Harmony).end_of_turn() == "<|return|>");
    CHECK(chat_family_from_name("harmony") == ChatFamily::Harmony);
}

TEST_CASE("ChatML keeps the default system prompt a template hard-codes (SmolLM2)", "[unit][chat]") {
    auto t = detect("{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are SmolLM<|im_end|>\n' }}{% endif %}<|im_start|>");
    CHECK(t.render({{"user", "Hi"}}) == "<|im_start|>system\nYou are SmolLM<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    CHECK(t.render({{"system", "Be brief"}, {"user", "Hi"}}) ==
          "<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    CHECK(t.end_of_turn() == "<|im_end|>");
}

TEST_CASE("llama2 and llama3 render the documented formats", "[unit][chat]") {
    ChatTemplate l2(ChatFamily::Llama2);
    CHECK(l2.render({{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}}) ==
          "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]");
    ChatTemplate l3(ChatFamily::Llama3);
    CHECK(l3.render({{"user", "Hi"}}) ==
          "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("qwen3 keeps an answer's reasoning only after the last user message (its template, rendered by jinja2)", "[unit][chat]") {
    ChatTemplate q(ChatFamily::Qwen3);
    const std::string thought = "<think>\nR\n</think>\n\nA";
    CHECK(q.render({{"user", "Q"}, {"assistant", thought}}, false) ==
          "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n");
    CHECK(q.render({{"user", "Q"}, {"assistant", "A"}}, false) ==
          "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
    CHECK(q.render({{"user", "Q"}, {"assistant", thought}, {"user", "Q2"}}) ==
          "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
          "<|im_start|>assistant\n");
    CHECK(q.end_of_turn() == "<|im_end|>");
    CHECK(ChatTemplate(ChatFamily::Phi3).end_of_turn() == "<|end|>");
}

TEST_CASE("an unknown --chat-template name is a usage error listing the choices", "[unit][chat]") {
    test::GgufWriter w;
    auto p = test::temp_path("notmpl.gguf");
    w.write(p);
    CHECK_THROWS_WITH(ChatTemplate::from_gguf(GgufFile::open(p), "vicuna"), Catch::Contains("unknown chat template 'vicuna'"));
}

TEST_CASE("Mistral's [INST] dialects render Mistral's documented strings (its cookbook's templates.md)", "[unit][chat]") {
    const std::vector<ChatMessage> chat = {{"user", "Hello, how are you?"}, {"assistant", "Fine, and you?"}, {"user", "I'm doing great!"}};
    // v1 as 7B v0.2's and Mixtral 8x7B's templates write it: a space before each [INST] and answer.
    const auto v1 = detect("{{ ' [INST] ' + message['content'] + ' [/INST]' }}{{ ' ' + message['content'] + eos_token }}");
    CHECK(v1.render(chat) == "<s> [INST] Hello, how are you? [/INST] Fine, and you?</s> [INST] I'm doing great! [/INST]");
    CHECK(v1.render({{"system", "S"}, {"user", "Q"}}) == "<s> [INST] S\n\nQ [/INST]");  // in the first user turn
    // v3 (7B v0.3): "[INST] " without a space before [/INST]; the system prompt in the last user turn.
    const auto v3 = detect("{%- if tools %}[AVAILABLE_TOOLS]{% endif %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}");
    CHECK(v3.render(chat) == "<s>[INST] Hello, how are you?[/INST] Fine, and you?</s>[INST] I'm doing great![/INST]");
    CHECK(v3.render({{"system", "S"}, {"user", "Q"}, {"assistant", " A "}, {"user", "R"}}) ==
          "<s>[INST] Q[/INST] A</s>[INST] S\n\nR[/INST]");
    // Tekken (Nemo): no spaces at all.
    const auto tekken = detect("{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}[AVAILABLE_TOOLS]");
    CHECK(tekken.render(chat) == "<s>[INST]Hello, how are you?[/INST]Fine, and you?</s>[INST]I'm doing great![/INST]");
    // v7's tool format is not Nemo's: refused rather than written wrong.
    const auto v7 = detect("[SYSTEM_PROMPT]{{ '[INST]' }}");
    CHECK_THROWS_WITH(v7.render({{"user", "Q"}}, true, R"([{"type": "function", "function": {"name": "f"}}])"),
                      Catch::Contains("Mistral Small 3's tool format"));
}

TEST_CASE("DeepSeek-V3.1 keeps an answer after its first </think>, and opens no turn after an answer", "[unit][chat]") {
    const std::string user = "<\xef\xbd\x9cUser\xef\xbd\x9c>", end = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    const std::string assistant = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think></think>";
    const auto v31 = detect(user + assistant + "{{'<think></think>'}}");
    REQUIRE(v31.family() == ChatFamily::DeepSeek3);
    // As its template renders them (tests/fixtures/chat_templates/deepseek-v3.1.jinja, by jinja2).
    CHECK(v31.render({{"user", "a"}, {"assistant", "r1</think>x</think>y"}}) == user + "a" + assistant + "x</think>y" + end);
    CHECK(v31.render({{"user", "a"}, {"assistant", "b"}, {"user", "c"}}) == user + "a" + assistant + "b" + end + user + "c" + assistant);
}
