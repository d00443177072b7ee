"""Model families: which served names belong to which family, how a family is resolved, and
what each family tells the rest of Emil (no name checks anywhere else)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from emil.config import Settings, load_settings
from emil.exceptions import ConfigurationError, UnknownTokenizerError
from emil.model.family import (
    FAMILIES,
    ModelFamily,
    family_by_name,
    family_for_model,
    generic_family,
)
from emil.model.resolve import describe_family, resolve_family
from emil.model.tokens import QWEN3_ADDED_TOKENS, TokenCounter

BELONGS = {
    "qwen3.6": ["qwen3.6", "Qwen/Qwen3.6-35B-A3B", "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast", "RedHatAI/Qwen3.6-35B-A3B-AWQ"],
    "qwen3.5": ["qwen3.5", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-27B-FP8", "qwen35-9b"],
    "qwen3": ["Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-32B-AWQ", "unsloth/Qwen3-30B-A3B-GGUF", "Qwen/Qwen3-0.6B"],
    "qwen3-instruct-2507": ["Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-4B-Instruct-2507-FP8"],
    "qwen3-coder": ["Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"],
}
NO_FAMILY = [
    "Qwen/Qwen3-30B-A3B-Thinking-2507",  # another template (always thinks)
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3-Coder-Next",
    "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3-8B-Base",
    "Qwen/Qwen2.5-7B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "my-qwen3.6-copy",
    "qwen3.65",
]


@pytest.mark.parametrize(("family", "names"), BELONGS.items())
def test_served_names_select_their_family(family: str, names: list[str]) -> None:
    for name in names:
        found = family_for_model(name)
        assert found is not None and found.name == family, name


@pytest.mark.parametrize("name", NO_FAMILY)
def test_other_models_belong_to_no_family(name: str) -> None:
    assert family_for_model(name) is None


def test_every_family_has_a_template_and_its_vocabularys_special_tokens() -> None:
    for family in FAMILIES:
        assert family.template is not None and family.template().source
        assert isinstance(family.tokenizer(), TokenCounter)
        assert "<|im_start|>" in family.special_tokens and "<think>" in family.special_tokens
    assert family_by_name("qwen3").special_tokens == frozenset(QWEN3_ADDED_TOKENS)
    assert len(family_by_name("qwen3.6").special_tokens) == 33


def test_template_kwargs_are_only_what_the_template_reads() -> None:
    kw = {"enable_thinking": True, "preserve_thinking": True}
    assert family_by_name("qwen3.6").template_kwargs(**kw) == kw
    assert family_by_name("qwen3.5").template_kwargs(**kw) == {"enable_thinking": True}
    assert family_by_name("qwen3").template_kwargs(**kw) == {"enable_thinking": True}
    assert family_by_name("qwen3-coder").template_kwargs(**kw) == {}
    assert family_by_name("qwen3-instruct-2507").template_kwargs(**kw) == {}


def _server() -> ModelFamily:
    return ModelFamily(name="server", label="test", tokenizer=generic_family().tokenizer, template=None)


def test_resolution_order_setting_files_root_id_server(tmp_path: Path) -> None:
    served = ("Qwen/Qwen3-8B", "emil-model")
    assert resolve_family(setting="qwen3-coder", served=served).family.name == "qwen3-coder"
    root = resolve_family(setting="auto", served=served, server=_server)
    assert root.family.name == "qwen3" and "root" in root.source
    by_id = resolve_family(setting="auto", served=(None, "Qwen/Qwen3.6-35B-A3B"), server=_server)
    assert by_id.family.name == "qwen3.6" and "id" in by_id.source
    unknown = resolve_family(setting="auto", served=("acme/x", "x"), server=_server)
    assert unknown.family.name == "server" and "/tokenize" in unknown.source
    forced = resolve_family(setting="server", served=served, server=_server)
    assert forced.family.name == "server"
    named = resolve_family(setting="auto", served=("acme/x", "x"), tokenizer="Qwen/Qwen3-8B")
    assert named.family.name == "qwen3" and "tokenizer" in named.source


def test_a_model_directory_counts_with_its_own_template(tmp_path: Path) -> None:
    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "hi": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<s>", "</s>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}<s> {{ m.content }} </s>{% endfor %}")
    resolved = resolve_family(setting="auto", served=("Qwen/Qwen3-8B", "x"), tokenizer=str(tmp_path))
    family = resolved.family
    assert family.name == "model-dir" and family.special_tokens == {"<s>", "</s>"}
    assert family.template is not None and "<s>" in family.template().source


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"setting": "llama"}, ConfigurationError, "not a shipped family"),
        ({"setting": "auto", "tokenizer": "gpt-17"}, UnknownTokenizerError, "gpt-17"),
        ({"setting": "auto", "chat_template": "t.jinja"}, ConfigurationError, "set tokenizer"),
        ({"setting": "auto", "served": ("acme/x", "x")}, ConfigurationError, "no model family"),
        ({"setting": "server"}, ConfigurationError, "needs an endpoint"),
    ],
)
def test_no_silent_fallback(kwargs: dict[str, object], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        resolve_family(**kwargs)  # type: ignore[arg-type]


def test_print_config_names_the_family_and_its_source() -> None:
    assert describe_family(Settings()).startswith("at start: the served model's root")
    text = describe_family(Settings(model="Qwen/Qwen3-30B-A3B-Instruct-2507"))
    assert text.startswith("qwen3-instruct-2507:") and "served model id" in text
    assert describe_family(Settings(model_family="qwen3")).startswith("qwen3: ")
    with pytest.raises(ConfigurationError, match="model_family"):
        load_settings({"model_family": "nope"})
