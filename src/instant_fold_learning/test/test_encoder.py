"""Cloth encoder: interface, geometry of tokens, LoRA, DINOv3 checkpoint layout, save/load."""

import dataclasses
import json

import pytest
import timm
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.errors import ConfigError
from instant_fold_core.geometry import GeometryError, backproject_depth
from instant_fold_learning.encoder import ClothEncoder, EncoderConfig, TokenBatch, preset
from instant_fold_learning.encoder.backbone import MultiLayerBackbone
from instant_fold_learning.encoder.lora import LoRALinear
from instant_fold_learning.encoder.training import PretrainConfig


def observation(b=2, h=120, w=160, f=140.0):
    gen = torch.Generator().manual_seed(0)
    rgb = torch.rand(b, 3, h, w, generator=gen)
    depth = 0.7 + 0.05 * torch.rand(b, h, w, generator=gen)
    mask = torch.zeros(b, h, w, dtype=torch.bool)
    mask[:, 30:90, 50:120] = True
    k = torch.tensor([[f, 0.0, w / 2], [0.0, f, h / 2], [0.0, 0.0, 1.0]]).expand(b, 3, 3).clone()
    return rgb, depth, mask, k


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return ClothEncoder(preset("cpu-small")).eval()


def test_tokens_lie_on_the_masked_cloth_and_have_the_configured_shape(small):
    rgb, depth, mask, k = observation()
    tokens = small(rgb, depth, mask, k)
    assert isinstance(tokens, TokenBatch)
    assert tokens.positions.shape == (2, small.num_tokens, 3)
    assert tokens.features.shape == (2, small.num_tokens, small.feature_dim)
    assert tokens.valid.dtype == torch.bool and tokens.valid.all()
    # every token is one of the back-projected cloth points (within resize tolerance)
    pts, ok = backproject_depth(depth, mask, k)
    for b in range(2):
        d = torch.cdist(tokens.positions[b], pts[b][ok[b]])
        assert d.min(dim=1).values.max() < 0.01
    # the tokens spread over the cloth (FPS): they span most of the cloth's extent
    cloth = pts[0][ok[0]]
    span = tokens.positions[0].amax(0)[:2] - tokens.positions[0].amin(0)[:2]
    assert (span > 0.8 * (cloth.amax(0)[:2] - cloth.amin(0)[:2])).all()


def test_deterministic_mode_repeats_and_random_mode_varies(small):
    rgb, depth, mask, k = observation(b=1)
    with torch.no_grad():
        a = small(rgb, depth, mask, k, deterministic=True)
        b = small(rgb, depth, mask, k, deterministic=True)
        c = small(rgb, depth, mask, k, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.positions, b.positions) and torch.allclose(a.features, b.features)
    assert not torch.equal(a.positions, c.positions)


def test_tiny_cloth_marks_padding_tokens_invalid(small):
    rgb, depth, mask, k = observation(b=1)
    mask[:] = False
    mask[0, 60, 80:90] = True  # 10 pixels -> after the resize fewer than 64 points
    tokens = small(rgb, depth, mask, k)
    n_valid = int(tokens.valid.sum())
    assert 0 < n_valid < small.num_tokens
    assert tokens.valid[0, :n_valid].all()


@pytest.mark.parametrize(
    "field,mutate",
    [
        ("mask", lambda r, d, m, k: (r, d, torch.zeros_like(m), k)),
        ("mask", lambda r, d, m, k: (r, d, m.float(), k)),
        ("depth", lambda r, d, m, k: (r, d.fill_(float("nan")), m, k)),
        ("rgb", lambda r, d, m, k: (r[:, :2], d, m, k)),
        ("intrinsics", lambda r, d, m, k: (r, d, m, k[:, :2])),
    ],
)
def test_bad_observations_raise_errors_naming_the_field(small, field, mutate):
    with pytest.raises(GeometryError, match=field):
        small(*mutate(*observation(b=1)))


def test_zero_depth_cloth_is_an_empty_cloth(small):
    rgb, depth, mask, k = observation(b=1)
    with pytest.raises(GeometryError, match="mask"):
        small(rgb, torch.zeros_like(depth), mask, k)


def test_paper_config_freezes_backbone_and_adapts_q_v_of_last_four_blocks():
    cfg = dataclasses.replace(preset("paper"), image_size=128)  # paper architecture, smaller input for speed
    tok = ClothEncoder(cfg)
    vit = tok.backbone.vit
    assert isinstance(vit, timm.models.eva.Eva) and vit.embed_dim == 384 and len(vit.blocks) == 12
    for i, block in enumerate(vit.blocks):
        wrapped = isinstance(block.attn.q_proj, LoRALinear)
        assert wrapped == (i >= 8) and isinstance(block.attn.v_proj, LoRALinear) == (i >= 8)
        assert not isinstance(block.attn.k_proj, LoRALinear)
    trainable = {n for n, p in tok.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("projection.") for n in trainable)
    assert all(vit.blocks[8].attn.q_proj.lora_a.weight.shape == (32, 384) for _ in [0])
    assert tok.backbone.out_channels == 4 * 384
    rgb, depth, mask, k = observation(b=1, h=240, w=320, f=280.0)
    tokens = tok(rgb, depth, mask, k)
    assert tokens.features.shape == (1, 64, cfg.feature_dim)
    tokens.features.sum().backward()
    assert vit.blocks[11].attn.v_proj.lora_a.weight.grad is not None
    assert vit.blocks[0].attn.q_proj.weight.grad is None


def test_lora_starts_as_identity_and_multi_layer_output_is_the_chosen_blocks():
    cfg = dataclasses.replace(preset("cpu-small"), lora_rank=0)
    torch.manual_seed(1)
    plain = MultiLayerBackbone(cfg)
    torch.manual_seed(1)
    adapted = MultiLayerBackbone(dataclasses.replace(cfg, lora_rank=4))
    x = torch.rand(1, 3, 96, 96)
    assert torch.allclose(plain(x), adapted(x), atol=1e-6)
    only_last = MultiLayerBackbone(dataclasses.replace(cfg, layers=(4,)))
    only_last.load_state_dict(plain.state_dict())
    assert torch.allclose(plain(x)[:, -96:], only_last(x), atol=1e-6)


def to_official_dinov3(state: dict[str, torch.Tensor], q_bias: float = 0.0) -> dict[str, torch.Tensor]:
    """Write a timm Eva state dict in the official DINOv3 key layout (fused qkv with bias and
    bias mask, ls1/ls2 gamma, storage tokens, w1/w2/w3 SwiGLU, rope periods, mask token)."""
    out = {"mask_token": torch.zeros(1, 384), "rope_embed.periods": torch.ones(16)}
    for key, value in state.items():
        if ".attn.q_proj.weight" in key:
            stem = key.replace("q_proj.weight", "")
            out[stem + "qkv.weight"] = torch.cat([state[stem + f"{p}_proj.weight"] for p in "qkv"])
            bias = torch.zeros(3 * 384)
            bias[:384] = q_bias
            out[stem + "qkv.bias"] = bias
            out[stem + "qkv.bias_mask"] = torch.ones(3 * 384)
            continue
        if ".attn.k_proj." in key or ".attn.v_proj." in key:
            continue
        for new, old in (
            ("reg_token", "storage_tokens"),
            ("gamma_1", "ls1.gamma"),
            ("gamma_2", "ls2.gamma"),
            ("mlp.fc1_g", "mlp.w1"),
            ("mlp.fc1_x", "mlp.w2"),
            ("mlp.fc2", "mlp.w3"),
        ):
            key = key.replace(new, old)
        out[key] = value
    return out


def test_loads_official_dinov3_checkpoint_layout(tmp_path):
    torch.manual_seed(5)
    source = timm.create_model("vit_small_plus_patch16_dinov3", pretrained=False, num_classes=0, qkv_fused=False)
    for p in source.parameters():  # make every tensor distinctive (layer-scale init is tiny)
        p.data.normal_(0, 0.05)
    path = tmp_path / "dinov3_vits16plus_pretrain.pth"
    torch.save({k: v.clone() for k, v in to_official_dinov3(source.state_dict()).items()}, path)
    cfg = dataclasses.replace(preset("paper"), backbone_checkpoint=str(path))
    backbone = MultiLayerBackbone(cfg).eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        expected = torch.cat(
            source.forward_intermediates(x, indices=[2, 5, 8, 11], norm=True, intermediates_only=True), dim=1
        )
        assert torch.allclose(backbone(x), expected, atol=1e-5)

    torch.save(to_official_dinov3(source.state_dict(), q_bias=0.5), path)
    with pytest.raises(CheckpointError, match="non-zero biases"):
        MultiLayerBackbone(cfg)
    broken = to_official_dinov3(source.state_dict())
    del broken["blocks.3.mlp.w1.weight"]
    torch.save(broken, path)
    with pytest.raises(CheckpointError, match="missing"):
        MultiLayerBackbone(cfg)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        MultiLayerBackbone(cfg)
    with pytest.raises(CheckpointError, match="no such file"):
        MultiLayerBackbone(dataclasses.replace(cfg, backbone_checkpoint=str(tmp_path / "absent.pth")))


def test_save_and_load_round_trip_and_clear_errors(small, tmp_path):
    rgb, depth, mask, k = observation(b=1)
    small.save_pretrained(tmp_path / "tok")
    loaded = ClothEncoder.from_pretrained(tmp_path / "tok")
    with torch.no_grad():
        a = small(rgb, depth, mask, k, deterministic=True)
        b = loaded(rgb, depth, mask, k, deterministic=True)
    assert torch.allclose(a.features, b.features) and loaded.config == small.config
    config = json.loads((tmp_path / "tok" / "config.json").read_text())
    assert config["kind"] == "cloth_encoder"
    # Encoders saved before the rename say `cloth_tokenizer`: the same format, still read.
    (tmp_path / "tok" / "config.json").write_text(json.dumps({**config, "kind": "cloth_tokenizer"}))
    assert ClothEncoder.from_pretrained(tmp_path / "tok").config == small.config
    (tmp_path / "tok" / "config.json").write_text(json.dumps({**config, "kind": "policy"}))
    with pytest.raises(CheckpointError, match="does not describe a cloth encoder"):
        ClothEncoder.from_pretrained(tmp_path / "tok")
    (tmp_path / "tok" / "config.json").write_text(json.dumps(config))

    with pytest.raises(CheckpointError, match="no such directory"):
        ClothEncoder.from_pretrained(tmp_path / "missing")
    weights = tmp_path / "tok" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt"):
        ClothEncoder.from_pretrained(tmp_path / "tok")
    ClothEncoder(dataclasses.replace(small.config, feature_dim=32)).save_pretrained(tmp_path / "other")
    (tmp_path / "other" / "config.json").write_text((tmp_path / "tok" / "config.json").read_text())
    with pytest.raises(CheckpointError, match="wrong shape"):
        ClothEncoder.from_pretrained(tmp_path / "other")
    (tmp_path / "other" / "config.json").write_text("{broken")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        ClothEncoder.from_pretrained(tmp_path / "other")


def test_config_yaml_round_trip_and_validation(tmp_path):
    cfg = preset("cpu-small")
    path = tmp_path / "enc.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"encoder": {**cfg.to_dict(), "layers": list(cfg.layers)}}))
    assert PretrainConfig.load(str(path)).encoder == cfg
    with pytest.raises(ConfigError, match=r"unknown keys \['encoder.nope'\]"):
        EncoderConfig.from_dict({"nope": 1})
    with pytest.raises(ConfigError, match=r"encoder.image_size: expected an integer, got '96'"):
        EncoderConfig.from_dict({"image_size": "96"})
    with pytest.raises(ValueError, match="near/far"):
        EncoderConfig(near=2.0, far=1.0)
