"""Read the class defaults of transformers' config classes from its source (no import, no torch).

    python scripts/transformers_defaults.py transformers-5.24.0-py3-none-any.whl > defaults.json

For each ``configuration_*.py`` in the wheel, every class with a ``model_type = "…"`` attribute
gives its literal defaults: class-level annotated fields (transformers ≥ 5, dataclass style) and
``__init__`` keyword defaults (earlier releases). Only the fields in ``FIELDS`` are kept. The
output pins ``tests/data/transformers-config-defaults.json``, which the test of
``app.core.config_defaults`` reads.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile

FIELDS = (
    "vocab_size", "max_position_embeddings", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "tie_word_embeddings", "sliding_window",
    "hidden_act", "hidden_activation", "num_experts", "num_local_experts", "num_experts_per_tok",
    "moe_intermediate_size", "shared_expert_intermediate_size", "n_routed_experts", "n_shared_experts",
    "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
    "v_head_dim", "attention_bias", "partial_rotary_factor", "decoder_sparse_step", "use_sliding_window",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "full_attention_interval", "attention_chunk_size", "interleave_moe_layer_step",
    "intermediate_size_mlp",
    # GPT-2 / GPTBigCode / OPT / Falcon decoders (app.core.weights_arch)
    "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "multi_query", "ffn_dim", "enable_bias",
    "do_layer_norm_before", "_remove_final_layer_norm", "word_embed_proj_dim", "new_decoder_architecture",
    "parallel_attn", "bias", "num_ln_in_parallel_attn", "alibi", "num_kv_heads", "ffn_hidden_size",
)  # fmt: skip


def _literal(node: ast.expr | None) -> tuple[bool, object]:
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError):
        pass
    # Constant arithmetic (MistralConfig's `max_position_embeddings: int = 4096 * 32`): literal_eval
    # refuses it, and the field was dropped, so such a config was "assumed 2048".
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Pow, ast.FloorDiv)):
        (ok_l, left), (ok_r, right) = _literal(node.left), _literal(node.right)
        if ok_l and ok_r and type(left) is int and type(right) is int:
            ops = {ast.Mult: int.__mul__, ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Pow: int.__pow__,
                   ast.FloorDiv: int.__floordiv__}
            return True, ops[type(node.op)](left, right)
    return False, None


def _class_defaults(cls: ast.ClassDef) -> tuple[str | None, dict[str, object]]:
    model_type, out = None, {}
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["model_type"]:
            ok, value = _literal(stmt.value)
            model_type = value if ok and isinstance(value, str) else None
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            ok, value = _literal(stmt.value)
            if ok:
                out[stmt.target.id] = value
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args
            pos = args.args[len(args.args) - len(args.defaults) :]
            pairs = [*zip(pos, args.defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
            for arg, default in pairs:
                ok, value = _literal(default)
                if ok:
                    out.setdefault(arg.arg, value)
    return model_type, {k: v for k, v in out.items() if k in FIELDS}


def main(wheel: str) -> None:
    found: dict[str, dict[str, object]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if not (name.startswith("transformers/models/") and name.rsplit("/", 1)[-1].startswith("configuration_")):
                continue
            for node in ast.walk(ast.parse(zf.read(name))):
                if isinstance(node, ast.ClassDef):
                    model_type, defaults = _class_defaults(node)
                    if model_type and defaults:
                        found.setdefault(model_type, defaults)
    json.dump({"source": wheel.rsplit("/", 1)[-1], "defaults": found}, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
