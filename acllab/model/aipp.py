"""Static AIPP: the image preprocessing atc builds into a model (``--insert_op_conf``).

The configuration file is protobuf text format, as in CANN (documentation pages "ATC
parameters: --insert_op_conf" and "AIPP configuration file" / "aipp_op template")::

    aipp_op {
        aipp_mode : static
        related_input_rank : 0
        input_format : YUV420SP_U8        # or RGB888_U8, XRGB8888_U8, YUV400_U8
        src_image_size_w : 256
        src_image_size_h : 224
        crop : true
        load_start_pos_w : 16
        load_start_pos_h : 0
        crop_size_w : 224
        crop_size_h : 224
        resize : false                     # resize : true + resize_output_w / resize_output_h
        csc_switch : true
        rbuv_swap_switch : false
        matrix_r0c0 : 256  ...  matrix_r2c2 : 0
        input_bias_0 : 0   input_bias_1 : 128   input_bias_2 : 128
        mean_chn_0 : 104   min_chn_0 : 0.0   var_reci_chn_0 : 1.0   ...
    }

What the model does with it, per image (the order acllab uses; CANN's figure "AIPP processing
order" puts crop first and data-type conversion last):

1. decode the uint8 source of ``src_image_size_h x src_image_size_w`` pixels: RGB888 (3 bytes
   a pixel), XRGB8888 (4 bytes, the first dropped, or the last with ``ax_swap_switch``),
   YUV400 (1 byte), YUV420SP (NV12: a Y plane, then interleaved U,V at half resolution in
   both directions; ``rbuv_swap_switch`` reads V,U, i.e. NV21); for RGB formats
   ``rbuv_swap_switch`` swaps R and B;
2. crop the window at (``load_start_pos_h``, ``load_start_pos_w``) of ``crop_size_h x
   crop_size_w``;
3. resize it (bilinear, half-pixel centres, rounded back to uint8) to ``resize_output_h x
   resize_output_w``;
4. colour-space conversion in fixed point (matrix entries are the coefficients times 256):
   for YUV sources ``out = (M @ (in - input_bias)) >> 8``; for RGB sources
   ``out = ((M @ in) >> 8) + output_bias``; clipped to 0..255;
5. data-type conversion into the model's float input:
   ``(pixel - mean_chn_i - min_chn_i) * var_reci_chn_i``, rounded to fp16 (the AI Core
   writes fp16).

The model's input then becomes uint8 images of the source size: its description reports dtype
UINT8, format NHWC, dims ``[N, src_h, src_w, C]`` and the real byte size (``N * h * w * 3 / 2``
for YUV420SP). The preprocessing is one vector-unit op on the AI Core, timed like any other op.

With ``--dynamic_image_size`` the config must leave ``src_image_size_w`` and ``_h`` at 0 and
turn crop and padding off, as atc requires; the source is then each gear's image, and the
input reports -1 in H and W (see :func:`build_config`).

Dynamic AIPP (``aipp_mode : dynamic``, with ``max_src_image_size``, the largest source in
bytes, and ``related_input_rank``) leaves the steps to the program: the model gains a uint8
input ``ascend_dynamic_aipp_data`` of 64 + 96 x N bytes (hicann/ge,
compiler/graph/preprocess/insert_op/aipp_op.cc, CalcMaxSize and AddNodeToGraph), which
``acl.mdl.set_input_aipp`` fills from an ``aclmdlAIPP`` before execute; the image input becomes
``max_src_image_size`` bytes of uint8 with dims [N, -1, -1, -1] (CreateAippData). The bytes are
GE's ``kAippDynamicPara`` header (format, CSC, swaps, source size) and one
``kAippDynamicBatchPara`` per image (crop, resize, padding, mean, min, var_reci as fp16), at the
offsets of CANN's AIPP operator; :func:`pack_dynamic` writes them and
:func:`dynamic_configs` reads them back into one :class:`AippConfig` per image, which the model
applies as it does a static one, then pads. Its other fields are ignored, as atc does.

Differs from hardware: the resize interpolation and the rounding of the fixed-point CSC are
acllab's choices (CANN does not document them bit for bit); static padding, rotation and
formats other than the four above are refused with a readable error; dynamic AIPP is built for
static shapes only (not with --dynamic_batch_size, --dynamic_image_size or --dynamic_dims).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

import numpy as np

__all__ = ["AippError", "AippConfig", "parse_aipp", "apply_aipp", "SRC_CHANNELS",
           "source_bytes", "aipp_flops", "DynamicAipp", "build_dynamic", "dynamic_data_size",
           "pack_dynamic", "dynamic_configs", "apply_dynamic", "DYNAMIC_AIPP_NAME"]

#: Channels a pixel of each source format has after decoding (what the model's C must be).
SRC_CHANNELS = {"YUV420SP_U8": 3, "RGB888_U8": 3, "XRGB8888_U8": 3, "YUV400_U8": 1}
_BYTES_PER_PIXEL = {"RGB888_U8": 3.0, "XRGB8888_U8": 4.0, "YUV400_U8": 1.0, "YUV420SP_U8": 1.5}
_KNOWN_FORMATS = ("YUV420SP_U8", "XRGB8888_U8", "RGB888_U8", "YUV400_U8", "ARGB8888_U8",
                  "YUYV_U8", "YUV422SP_U8", "AYUV444_U8", "RAW10", "RAW12", "RAW16", "RAW24")


class AippError(ValueError):
    """An AIPP configuration is malformed or does not fit the model."""


_INT_FIELDS = (["related_input_rank", "src_image_size_w", "src_image_size_h",
                "load_start_pos_w", "load_start_pos_h", "crop_size_w", "crop_size_h",
                "resize_input_w", "resize_input_h", "resize_output_w", "resize_output_h",
                "left_padding_size", "right_padding_size", "top_padding_size",
                "bottom_padding_size", "padding_value"]
               + [f"matrix_r{i}c{j}" for i in range(3) for j in range(3)]
               + [f"{k}_bias_{i}" for k in ("input", "output") for i in range(3)]
               + [f"mean_chn_{i}" for i in range(4)] + ["max_src_image_size"])
_FLOAT_FIELDS = [f"{k}_chn_{i}" for k in ("min", "var_reci") for i in range(4)]
_BOOL_FIELDS = ["crop", "resize", "padding", "csc_switch", "rbuv_swap_switch", "ax_swap_switch",
                "single_line_mode", "rotation", "support_rotation"]
_ENUM_FIELDS = {"aipp_mode": ("static", "dynamic"), "input_format": _KNOWN_FORMATS}


@dataclass(frozen=True)
class AippConfig:
    """One ``aipp_op`` block, checked (see the module docstring for the fields)."""

    input_format: str
    src_w: int
    src_h: int
    related_input_rank: int = 0
    crop: tuple[int, int, int, int] | None = None      # (start_h, start_w, size_h, size_w)
    resize: tuple[int, int] | None = None              # (out_h, out_w)
    csc: tuple[int, ...] | None = None                  # 9 matrix entries, row-major
    input_bias: tuple[int, int, int] = (0, 0, 0)
    output_bias: tuple[int, int, int] = (0, 0, 0)
    rbuv_swap: bool = False
    ax_swap: bool = False
    mean: tuple[int, ...] = (0, 0, 0, 0)
    min: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    var_reci: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    follows_gear: bool = False     # the source is each --dynamic_image_size gear's size
    fields: dict = field(default_factory=dict, compare=False)   # as written, for the report

    @property
    def channels(self) -> int:
        return SRC_CHANNELS[self.input_format]

    @property
    def out_hw(self) -> tuple[int, int]:
        """(h, w) of what the model's first layer receives."""
        if self.resize is not None:
            return self.resize
        if self.crop is not None:
            return self.crop[2], self.crop[3]
        return self.src_h, self.src_w

    def at(self, h: int, w: int) -> AippConfig:
        """The config for a model input of ``h x w``: itself, or, when the source follows
        the image-size gears, the same steps on a source of ``h x w``."""
        if not self.follows_gear or (h, w) == (self.src_h, self.src_w):
            return self
        return replace(self, src_h=int(h), src_w=int(w))

    def to_dict(self) -> dict:
        """JSON-ready (tuples as lists), so a model and its .om round trip compare equal."""
        d = asdict(self)
        d.pop("fields")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict) -> AippConfig:
        def tup(v, conv=int):
            return None if v is None else tuple(conv(x) for x in v)
        return cls(str(d["input_format"]), int(d["src_w"]), int(d["src_h"]),
                   int(d["related_input_rank"]), tup(d["crop"]), tup(d["resize"]),
                   tup(d["csc"]), tup(d["input_bias"]), tup(d["output_bias"]),
                   bool(d["rbuv_swap"]), bool(d["ax_swap"]), tup(d["mean"]),
                   tup(d["min"], float), tup(d["var_reci"], float),
                   bool(d.get("follows_gear", False)))


# ---- parsing ------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(#[^\n]*)|([A-Za-z_][A-Za-z0-9_]*)|([-+]?(?:\d+\.?\d*|\.\d+)"
                    r"(?:[eE][-+]?\d+)?)|(\"[^\"\n]*\")|([{}:;,<>]))")


def _tokens(text: str):
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            rest = text[pos:].lstrip()
            if not rest:
                return
            line += text[pos:len(text) - len(rest)].count("\n")
            raise AippError(f"line {line}: unexpected character {rest[0]!r}")
        line += text[pos:m.start(m.lastindex)].count("\n")
        pos = m.end()
        if m.lastindex != 1:
            yield line, m.group(m.lastindex)


def _value(name: str, tok: str, line: int):
    where = f"line {line}: {name}"
    if name in _INT_FIELDS:
        if not re.fullmatch(r"[-+]?\d+", tok):
            raise AippError(f"{where} takes an integer, got {tok!r}")
        return int(tok)
    if name in _FLOAT_FIELDS:
        try:
            return float(tok)
        except ValueError:
            raise AippError(f"{where} takes a number, got {tok!r}") from None
    if name in _BOOL_FIELDS:
        if tok not in ("true", "false", "1", "0"):
            raise AippError(f"{where} takes true or false, got {tok!r}")
        return tok in ("true", "1")
    choices = _ENUM_FIELDS[name]
    if tok not in choices:
        raise AippError(f"{where} must be one of {', '.join(choices)}, got {tok!r}")
    return tok


def parse_aipp(text: str) -> list[dict]:
    """The ``aipp_op`` blocks of a config file, as {field: value} dicts, strictly checked."""
    toks = list(_tokens(text))
    blocks: list[dict] = []
    i = 0
    while i < len(toks):
        line, tok = toks[i]
        if tok != "aipp_op":
            raise AippError(f"line {line}: expected 'aipp_op {{', got {tok!r} (an AIPP config "
                            "holds aipp_op blocks only)")
        i += 1
        if i < len(toks) and toks[i][1] == ":":
            i += 1
        if i >= len(toks) or toks[i][1] != "{":
            raise AippError(f"line {line}: 'aipp_op' must be followed by '{{'")
        i += 1
        block: dict = {}
        while True:
            if i >= len(toks):
                raise AippError(f"line {line}: the aipp_op block opened here is never closed "
                                "with '}'")
            fline, name = toks[i]
            if name == "}":
                i += 1
                break
            known = _INT_FIELDS + _FLOAT_FIELDS + _BOOL_FIELDS + list(_ENUM_FIELDS)
            if name not in known:
                close = [k for k in known if k.split("_")[0] == name.split("_")[0]][:4]
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise AippError(f"line {fline}: unknown field {name!r}{hint}")
            if i + 2 >= len(toks) or toks[i + 1][1] != ":":
                raise AippError(f"line {fline}: expected '{name} : value'")
            if name in block:
                raise AippError(f"line {fline}: {name} is given twice")
            block[name] = _value(name, toks[i + 2][1], toks[i + 2][0])
            i += 3
            if i < len(toks) and toks[i][1] in (";", ","):
                i += 1
        blocks.append(block)
    if not blocks:
        raise AippError("the file holds no aipp_op block")
    return blocks


def build_config(block: dict, model_shape: tuple[int, ...], follows_gear: bool = False
                 ) -> AippConfig:
    """Check one block against the model input it feeds (NCHW ``model_shape``).

    ``follows_gear``: the input's H and W are --dynamic_image_size's (``model_shape`` is the
    largest gear). atc then takes static AIPP only with src_image_size_w and _h 0 and no
    crop or padding (CANN documentation, "ATC instructions: Static AIPP" and the
    application guide's "Restrictions": with --dynamic_image_size the input's width and
    height are unknown, so the AIPP config must disable cropping and padding and set
    src_image_size_w/h to 0); the source is then each gear's image. acllab refuses resize
    there too, as its output size would have to equal every gear at once.
    """
    def need(name):
        if name not in block:
            raise AippError(f"{name} is required")
        return block[name]

    if block.get("aipp_mode", "static") != "static" or "aipp_mode" not in block:
        raise AippError("this block is not static AIPP (see build_dynamic)"
                        if "aipp_mode" in block else "aipp_mode is required (static or "
                        "dynamic)")
    fmt = need("input_format")
    if fmt not in SRC_CHANNELS:
        raise AippError(f"input_format {fmt} is not supported by acllab; use one of "
                        f"{', '.join(SRC_CHANNELS)}")
    for flag in ("padding", "rotation", "single_line_mode"):
        if block.get(flag):
            raise AippError(f"{flag} : true is not supported by acllab")
    if any(block.get(f"{s}_padding_size", 0) for s in ("left", "right", "top", "bottom")):
        raise AippError("padding sizes need padding : true, which acllab does not support")
    if len(model_shape) != 4:
        raise AippError(f"AIPP feeds a 4-D image input; this input is {list(model_shape)}")
    _n, c, mh, mw = model_shape
    src_w, src_h = int(block.get("src_image_size_w", 0)), int(block.get("src_image_size_h", 0))
    if follows_gear:
        if src_w or src_h:
            raise AippError(f"with --dynamic_image_size, src_image_size_w and "
                            f"src_image_size_h must be 0 (the source is each gear's image), "
                            f"got {src_w}x{src_h}")
        for flag in ("crop", "resize"):
            if block.get(flag):
                raise AippError(f"{flag} : true cannot be used with --dynamic_image_size "
                                "(the image size changes with the gear)")
    if src_w < 0 or src_h < 0 or src_w > 4096 or src_h > 4096:
        raise AippError(f"src_image_size_w/h must be in [0, 4096], got {src_w}x{src_h}")
    src_w, src_h = src_w or mw, src_h or mh           # 0: the model's own size
    if fmt == "YUV420SP_U8" and (src_w % 2 or src_h % 2):
        raise AippError(f"YUV420SP_U8 needs an even src_image_size_w and _h, got "
                        f"{src_w}x{src_h}")
    crop = None
    if block.get("crop"):
        y0, x0 = block.get("load_start_pos_h", 0), block.get("load_start_pos_w", 0)
        ch = block.get("crop_size_h", 0) or (mh if not block.get("resize") else 0)
        cw = block.get("crop_size_w", 0) or (mw if not block.get("resize") else 0)
        if ch <= 0 or cw <= 0 or y0 < 0 or x0 < 0:
            raise AippError("crop : true needs crop_size_w/h > 0 and load_start_pos_w/h >= 0")
        if y0 + ch > src_h or x0 + cw > src_w:
            raise AippError(f"the crop window (start w={x0}, h={y0}, size {cw}x{ch}) does "
                            f"not fit the {src_w}x{src_h} source image")
        if fmt == "YUV420SP_U8" and (x0 % 2 or y0 % 2):
            raise AippError("with YUV420SP_U8, load_start_pos_w and _h must be even")
        crop = (y0, x0, ch, cw)
    else:
        for k in ("load_start_pos_w", "load_start_pos_h", "crop_size_w", "crop_size_h"):
            if block.get(k, 0):
                raise AippError(f"{k} needs crop : true")
    resize = None
    if block.get("resize"):
        oh, ow = block.get("resize_output_h", 0), block.get("resize_output_w", 0)
        if oh <= 0 or ow <= 0:
            raise AippError("resize : true needs resize_output_w and resize_output_h > 0")
        resize = (oh, ow)
    elif block.get("resize_output_w", 0) or block.get("resize_output_h", 0):
        raise AippError("resize_output_w/h need resize : true")
    cfg_hw = resize or ((crop[2], crop[3]) if crop else (src_h, src_w))
    if cfg_hw != (mh, mw):
        raise AippError(f"after crop and resize the image is {cfg_hw[1]}x{cfg_hw[0]} (w x h), "
                        f"but the model input is {mw}x{mh}: set crop_size_w/h or "
                        "resize_output_w/h to the model's size")
    if SRC_CHANNELS[fmt] != c:
        raise AippError(f"{fmt} gives {SRC_CHANNELS[fmt]} channel(s); the model input has {c}")
    csc = None
    if block.get("csc_switch"):
        if fmt == "YUV400_U8":
            raise AippError("csc_switch : true does not apply to YUV400_U8 (one channel)")
        csc = tuple(int(block.get(f"matrix_r{i}c{j}", 0)) for i in range(3) for j in range(3))
        if any(not -32768 <= v <= 32767 for v in csc):
            raise AippError("matrix_rXcY entries are int16: -32768 to 32767")
    else:
        given = [k for k in block if k.startswith(("matrix_", "input_bias", "output_bias"))]
        if given:
            raise AippError(f"{given[0]} needs csc_switch : true")
    for k in ("input_bias", "output_bias"):
        if any(not 0 <= block.get(f"{k}_{i}", 0) <= 255 for i in range(3)):
            raise AippError(f"{k}_0.._2 must be in [0, 255]")
    if block.get("ax_swap_switch") and fmt != "XRGB8888_U8":
        raise AippError("ax_swap_switch applies to XRGB8888_U8 only")
    return AippConfig(
        fmt, src_w, src_h, int(block.get("related_input_rank", 0)), crop, resize, csc,
        tuple(int(block.get(f"input_bias_{i}", 0)) for i in range(3)),
        tuple(int(block.get(f"output_bias_{i}", 0)) for i in range(3)),
        bool(block.get("rbuv_swap_switch", False)), bool(block.get("ax_swap_switch", False)),
        tuple(int(block.get(f"mean_chn_{i}", 0)) for i in range(4)),
        tuple(float(block.get(f"min_chn_{i}", 0.0)) for i in range(4)),
        tuple(float(block.get(f"var_reci_chn_{i}", 1.0)) for i in range(4)), follows_gear,
        dict(block))


def source_bytes(cfg: AippConfig) -> int:
    """Bytes of one source image."""
    return int(cfg.src_w * cfg.src_h * _BYTES_PER_PIXEL[cfg.input_format])


def aipp_flops(cfg: AippConfig) -> int:
    """Vector work per image: decode, resize (8 a pixel), CSC (18), normalisation (3)."""
    oh, ow = cfg.out_hw
    per = 3 + (18 if cfg.csc else 0) + (8 if cfg.resize else 0)
    return oh * ow * cfg.channels * per


# ---- the data effect ----------------------------------------------------------------------
def _decode(raw: np.ndarray, cfg: AippConfig) -> np.ndarray:
    """One image's bytes -> (h, w, C) uint8."""
    h, w = cfg.src_h, cfg.src_w
    fmt = cfg.input_format
    if fmt == "YUV400_U8":
        return raw.reshape(h, w, 1)
    if fmt == "RGB888_U8":
        img = raw.reshape(h, w, 3)
    elif fmt == "XRGB8888_U8":
        px = raw.reshape(h, w, 4)
        img = px[..., :3] if cfg.ax_swap else px[..., 1:]
    else:                                             # YUV420SP: NV12 (NV21 when swapped)
        y = raw[:h * w].reshape(h, w)
        uv = raw[h * w:].reshape(h // 2, w // 2, 2)
        if cfg.rbuv_swap:
            uv = uv[..., ::-1]
        uv = uv.repeat(2, axis=0).repeat(2, axis=1)
        return np.dstack([y, uv[..., 0], uv[..., 1]])
    return img[..., ::-1] if cfg.rbuv_swap else img


def _resize(img: np.ndarray, oh: int, ow: int) -> np.ndarray:
    h, w = img.shape[:2]

    def axis(n_in, n_out):
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(np.int64)
        return lo, np.minimum(lo + 1, n_in - 1), pos - lo

    y0, y1, fy = axis(h, oh)
    x0, x1, fx = axis(w, ow)
    f = img.astype(np.float64)
    top = f[y0][:, x0] * (1 - fx)[None, :, None] + f[y0][:, x1] * fx[None, :, None]
    bot = f[y1][:, x0] * (1 - fx)[None, :, None] + f[y1][:, x1] * fx[None, :, None]
    out = top * (1 - fy)[:, None, None] + bot * fy[:, None, None]
    return np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)


def _csc(img: np.ndarray, cfg: AippConfig) -> np.ndarray:
    m = np.array(cfg.csc, dtype=np.int64).reshape(3, 3)
    x = img.astype(np.int64)
    if cfg.input_format.startswith("YUV"):
        out = ((x - np.array(cfg.input_bias)) @ m.T) >> 8
    else:
        out = ((x @ m.T) >> 8) + np.array(cfg.output_bias)
    return np.clip(out, 0, 255).astype(np.uint8)


def apply_aipp(cfg: AippConfig, raw: bytes | np.ndarray, batch: int) -> np.ndarray:
    """``batch`` source images (bytes, back to back) -> (batch, C, H, W) float32 (fp16 values)."""
    data = np.frombuffer(bytes(raw), dtype=np.uint8) if not isinstance(raw, np.ndarray) \
        else raw.reshape(-1)
    per = source_bytes(cfg)
    out = []
    for b in range(batch):
        img = _decode(data[b * per:(b + 1) * per], cfg)
        if cfg.crop is not None:
            y0, x0, ch, cw = cfg.crop
            img = img[y0:y0 + ch, x0:x0 + cw]
        if cfg.resize is not None:
            img = _resize(img, *cfg.resize)
        if cfg.csc is not None:
            img = _csc(img, cfg)
        c = img.shape[2]
        mean = np.array(cfg.mean[:c], np.float64)
        mn = np.array(cfg.min[:c], np.float64)
        var = np.array(cfg.var_reci[:c], np.float64)
        val = (img.astype(np.float64) - mean - mn) * var
        out.append(val.astype(np.float16).astype(np.float32).transpose(2, 0, 1))
    return np.ascontiguousarray(np.stack(out))


# ---- dynamic AIPP -------------------------------------------------------------------------
#: the name of the first dynamic-AIPP parameter input (acl_mdl.h, ACL_DYNAMIC_AIPP_NAME)
DYNAMIC_AIPP_NAME = "ascend_dynamic_aipp_data"
_HEAD, _BATCH = 64, 96          # sizeof(kAippDynamicPara) - sizeof(kAippDynamicBatchPara), and it
#: CANN's operator codes of the source formats (hicann/ge, model_desc_internal.h,
#: CceAippInputFormat; aclmdlSetAIPPInputFormat maps acl_mdl.h's aclAippInputFormat to them)
CCE_FORMATS = {1: "YUV420SP_U8", 2: "XRGB8888_U8", 3: "NC1HWC0DI_FP16", 4: "NC1HWC0DI_S8",
               5: "RGB888_U8", 6: "ARGB8888_U8", 7: "YUYV_U8", 8: "YUV422SP_U8", 9: "AYUV444_U8",
               10: "YUV400_U8", 11: "RAW10", 12: "RAW12", 13: "RAW16", 16: "RAW24"}
#: aclAippInputFormat (acl_mdl.h) -> CceAippInputFormat
ACL_TO_CCE = {1: 1, 2: 2, 3: 5, 4: 10, 5: 3, 6: 4, 7: 6, 8: 7, 9: 8, 10: 9, 11: 11, 12: 12,
              13: 13, 14: 16}
# the header and per-image records, at the offsets CANN's AIPP operator reads them
# (Ascend opp, impl/aipp_comm.py, HEAD_OFFSET_* and BATCH_OFFSET_*): little-endian, packed
_HEAD_DT = np.dtype({"names": ["fmt", "csc", "rbuv", "ax", "batch", "w", "h", "matrix",
                               "out_bias", "in_bias"],
                     "formats": ["u1", "i1", "i1", "i1", "i1", "<i4", "<i4", ("<i2", 9),
                                 ("u1", 3), ("u1", 3)],
                     "offsets": [0, 1, 2, 3, 4, 8, 12, 16, 40, 43], "itemsize": _HEAD})
_BATCH_DT = np.dtype({"names": ["crop", "scf", "pad", "rot", "crop_w0", "crop_h0", "crop_w",
                                "crop_h", "scf_in_w", "scf_in_h", "scf_out_w", "scf_out_h",
                                "pad_top", "pad_bottom", "pad_left", "pad_right", "mean",
                                "min", "var"],
                      "formats": ["i1", "i1", "i1", "i1"] + ["<i4"] * 12
                      + [("<i2", 4), ("<u2", 4), ("<u2", 4)],
                      "offsets": [0, 1, 2, 3, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56,
                                  64, 72], "itemsize": _BATCH})


def dynamic_data_size(batch: int) -> int:
    """Bytes of the dynamic-AIPP parameter input for ``batch`` images: 64 + 96 x batch
    (hicann/ge, aipp_op.cc, CalcMaxSize; acl_aipp_om2.cpp, aclmdlGetAippDataSize)."""
    return _HEAD + _BATCH * batch


@dataclass(frozen=True)
class DynamicAipp:
    """An ``aipp_mode : dynamic`` block checked against the model input it feeds."""

    related_input_rank: int
    max_src_image_size: int
    batch: int                     # N of the model input
    channels: int                  # C
    out_h: int                     # what every image must be after crop and padding
    out_w: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DynamicAipp:
        return cls(*(int(d[k]) for k in ("related_input_rank", "max_src_image_size", "batch",
                                          "channels", "out_h", "out_w")))


def build_dynamic(block: dict, model_shape: tuple[int, ...]) -> DynamicAipp:
    """Check one ``aipp_mode : dynamic`` block against its (NCHW) model input.

    atc requires ``max_src_image_size`` > 0 (hicann/ge, aipp_op.cc, ValidateParams: "For
    dynamic AIPP params, max_src_image_size must be set which number should be greater than
    0") and a 4-D NCHW/NHWC input (CreateAippData); the static fields are ignored, as GE
    ignores them in this mode. ``support_rotation : true`` is refused: CANN's template calls it
    reserved and unsupported.
    """
    size = int(block.get("max_src_image_size", 0))
    if size <= 0:
        raise AippError("for dynamic AIPP, max_src_image_size must be set to a number greater "
                        "than 0 (the largest source in bytes, e.g. N x w x h x 3 for RGB888_U8)")
    if block.get("support_rotation"):
        raise AippError("support_rotation : true is reserved: CANN does not support it")
    if len(model_shape) != 4:
        raise AippError(f"AIPP feeds a 4-D image input; this input is {list(model_shape)}")
    n, c, h, w = (int(d) for d in model_shape)
    if c not in (1, 3):
        raise AippError(f"dynamic AIPP gives 1 or 3 channels; the model input has {c}")
    return DynamicAipp(int(block.get("related_input_rank", 0)), size, n, c, h, w)


def _fp16_bits(x: float) -> int:
    return int(np.array(x, np.float16).view(np.uint16))


def pack_dynamic(head: dict, batches: list[dict]) -> bytes:
    """The parameter bytes for one ``aclmdlAIPP``: its header, then one record per image.

    ``head``: fmt (a CceAippInputFormat code), csc, rbuv, ax, w, h, matrix (9), out_bias (3),
    in_bias (3); each batch: crop, scf, pad (switches), crop_w0, crop_h0, crop_w, crop_h,
    scf_in_w, scf_in_h, scf_out_w, scf_out_h, pad_top, pad_bottom, pad_left, pad_right, mean
    (4 ints), min (4 floats), var (4 floats; both stored as fp16, as aclmdlSetAIPPDtcPixelMin
    and aclmdlSetAIPPPixelVarReci store them)."""
    h = np.zeros(1, _HEAD_DT)
    for k in ("fmt", "csc", "rbuv", "ax", "w", "h", "matrix", "out_bias", "in_bias"):
        h[k] = head[k]
    h["batch"] = len(batches)
    b = np.zeros(len(batches), _BATCH_DT)
    for i, item in enumerate(batches):
        for k, v in item.items():
            if k in ("min", "var"):
                b[i][k] = [_fp16_bits(x) for x in v]
            else:
                b[i][k] = v
    return h.tobytes() + b.tobytes()


def dynamic_configs(raw: bytes, spec: DynamicAipp) -> list[tuple[AippConfig, tuple]]:
    """The per-image steps written in a parameter input: (config, padding (top, bottom, left,
    right)) for each of the model's N images. Raises AippError when the bytes are no valid
    parameters (never set: input format 0; another batch count; a source or output size the
    model cannot take), as the AIPP operator would fail on the card."""
    if len(raw) < dynamic_data_size(1):
        raise AippError("the dynamic AIPP input is shorter than one image's parameters")
    head = np.frombuffer(raw[:_HEAD], _HEAD_DT)[0]
    fmt = CCE_FORMATS.get(int(head["fmt"]))
    if fmt is None:
        raise AippError(f"the dynamic AIPP input holds no parameters (input format code "
                        f"{int(head['fmt'])}): call acl.mdl.set_input_aipp on this dataset "
                        "before execute")
    if fmt not in SRC_CHANNELS:
        raise AippError(f"dynamic AIPP input format {fmt} is not supported")
    n = int(head["batch"])
    if n != spec.batch or len(raw) < dynamic_data_size(n):
        raise AippError(f"the dynamic AIPP parameters are for {n} image(s); the model takes "
                        f"{spec.batch}")
    w, h = int(head["w"]), int(head["h"])
    cfg = AippConfig(fmt, w, h, spec.related_input_rank)
    if source_bytes(cfg) * n > spec.max_src_image_size:
        raise AippError(f"{n} source image(s) of {w}x{h} {fmt} need "
                        f"{source_bytes(cfg) * n} B, more than max_src_image_size "
                        f"({spec.max_src_image_size} B)")
    recs = np.frombuffer(raw[_HEAD:_HEAD + _BATCH * n], _BATCH_DT)
    csc = tuple(int(v) for v in head["matrix"]) if int(head["csc"]) == 1 else None
    out = []
    for i, b in enumerate(recs):
        if int(b["scf"]) == 1:
            raise AippError(f"image {i}: dynamic AIPP does not resize (scf switch on)")
        crop = ((int(b["crop_h0"]), int(b["crop_w0"]), int(b["crop_h"]), int(b["crop_w"]))
                if int(b["crop"]) == 1 else None)
        pad = ((int(b["pad_top"]), int(b["pad_bottom"]), int(b["pad_left"]),
                int(b["pad_right"])) if int(b["pad"]) == 1 else (0, 0, 0, 0))
        one = replace(cfg, crop=crop, csc=csc,
                      input_bias=tuple(int(v) for v in head["in_bias"]),
                      output_bias=tuple(int(v) for v in head["out_bias"]),
                      rbuv_swap=int(head["rbuv"]) == 1, ax_swap=int(head["ax"]) == 1,
                      mean=tuple(int(v) for v in b["mean"]),
                      min=tuple(float(v) for v in b["min"].view(np.float16)),
                      var_reci=tuple(float(v) for v in b["var"].view(np.float16)))
        oh, ow = one.out_hw
        oh, ow = oh + pad[0] + pad[1], ow + pad[2] + pad[3]
        if (oh, ow) != (spec.out_h, spec.out_w) or one.channels != spec.channels:
            raise AippError(f"image {i}: dynamic AIPP gives {ow}x{oh} (w x h) with "
                            f"{one.channels} channel(s); the model input is "
                            f"{spec.out_w}x{spec.out_h} with {spec.channels}")
        if crop is not None and (crop[0] + crop[2] > h or crop[1] + crop[3] > w):
            raise AippError(f"image {i}: the crop window does not fit the {w}x{h} source")
        out.append((one, pad))
    return out


def apply_dynamic(steps: list[tuple[AippConfig, tuple]], raw: bytes | np.ndarray
                  ) -> np.ndarray:
    """The images (back to back, each of the source size) through their own steps, then
    padded with 0 (CANN's order: crop, CSC, normalisation, padding) -> (N, C, H, W) float32."""
    data = np.frombuffer(bytes(raw), dtype=np.uint8) if not isinstance(raw, np.ndarray) \
        else raw.reshape(-1)
    out = []
    for b, (cfg, (top, bottom, left, right)) in enumerate(steps):
        per = source_bytes(cfg)
        img = apply_aipp(cfg, data[b * per:(b + 1) * per], 1)[0]
        out.append(np.pad(img, ((0, 0), (top, bottom), (left, right))))
    return np.ascontiguousarray(np.stack(out))
