#include <catch2/catch.hpp>

#include "core/error.h"
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
    CHECK(detect("something else entirely").family() == ChatFamily::ChatML);  // fallback, with a warning
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
