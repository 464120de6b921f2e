"""Reading a streamed answer line by line: which chunks are tokens on each endpoint, where the
count comes from, and one clear line for a stream that breaks the protocol."""

from __future__ import annotations

import json

import pytest

from rooflab.core.measure.loadtest.stream import StreamError, StreamState, error_message, prometheus_samples


def data(obj) -> str:
    return "data: " + json.dumps(obj) + "\n"


def test_completion_chunks_are_tokens_even_when_empty():
    s = StreamState(chat=False)
    for i, text in enumerate(["a", "", "b"]):
        s.feed(data({"choices": [{"text": text, "finish_reason": None}]}), float(i))
    s.feed(data({"choices": [{"text": "", "finish_reason": "length"}]}), 3.0)
    s.feed(b": keep-alive\n", 3.5)
    s.feed("event: message\n", 3.6)
    s.feed("data: [DONE]\n", 4.0)
    assert list(s.token_times) == [0.0, 1.0, 2.0] and s.finished and s.answer_tokens == 3 and s.counted_by == "stream"


def test_chat_role_chunk_is_not_a_token_and_usage_counts():
    s = StreamState(chat=True)
    s.feed(data({"choices": [{"delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}), 0.0)
    s.feed(data({"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}), 1.0)
    s.feed(data({"choices": [{"delta": {"content": "!"}, "finish_reason": "stop"}]}), 2.0)
    s.feed(data({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3},
                 "timings": {"predicted_ms": 12.5, "note": "x"}}), 2.1)
    assert list(s.token_times) == [1.0, 2.0] and s.finish_reason == "stop"
    assert s.answer_tokens == 3 and s.counted_by == "usage" and s.timings == {"predicted_ms": 12.5}


@pytest.mark.parametrize("line, says", [
    ("data: {oops\n", "is not JSON"),
    ("data: [1, 2]\n", "malformed event"),
    (data({"error": {"message": "out of memory"}}), "the server reported an error after 0 tokens: out of memory"),
    (data({"choices": ["x"]}), "choices[0] is not an object"),
])
def test_broken_events_are_one_line(line, says):
    with pytest.raises(StreamError, match=says.replace("[", r"\[").replace("]", r"\]")) as err:
        StreamState(chat=False).feed(line, 0.0)
    assert "\n" not in str(err.value)


def test_error_bodies():
    assert error_message(b'{"error": {"message": "boom", "code": 500}}') == "boom"
    assert error_message('{"detail": "Not Found"}') == "Not Found"
    assert error_message(b"<html>\n  bad gateway </html>") == "<html> bad gateway </html>"
    assert error_message(b"") == "(empty body)"


def test_prometheus_samples():
    text = ('# HELP x\nvllm:num_requests_running{model_name="m a"} 3\nllamacpp:tokens_predicted_total 120 1700000000\n'
            "bad line\nnan_metric NaN\n")
    assert prometheus_samples(text) == {'vllm:num_requests_running{model_name="m a"}': 3.0,
                                        "llamacpp:tokens_predicted_total": 120.0}
