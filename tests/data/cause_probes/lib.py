"""Pure-python helpers: .npy/.npz writing, fp16/bf16 rounding, FP64 attention."""
import math, random, struct, zipfile, io, os

BIN = os.environ.get("FLASHCORE_CHECK", "flashcore-check")
OUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/data
os.makedirs(OUT, exist_ok=True)


def f16(x):
    """round double to fp16 (RNE), return as double."""
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(x):
    """fp32 value -> bf16 bits (RNE)."""
    b = f32_bits(f32(x))
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x7FFFFF):
        return 0x7FC0
    lsb = (b >> 16) & 1
    b = (b + 0x7FFF + lsb) & 0xFFFFFFFF
    return b >> 16


def bf16(x):
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


def flat(a):
    if isinstance(a, list):
        r = []
        for x in a:
            r.extend(flat(x))
        return r
    return [a]


def shape_of(a):
    s = []
    while isinstance(a, list):
        s.append(len(a))
        a = a[0] if a else None
    return tuple(s)


def npy(values, descr, shape):
    """values: flat list. descr e.g. '<f2', '<f4', '<u2', '|b1', '<i4', '<U8'."""
    shp = "(" + "".join(f"{d}, " if len(shape) == 1 else f"{d}, " for d in shape)
    shp = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    out = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    code = {"<f2": "e", "<f4": "f", "<f8": "d", "<u2": "H", "<i4": "i", "<i8": "q", "|b1": "?"}
    if descr.startswith("<U"):
        n = int(descr[2:])
        s = values[0]
        out += s.encode("utf-32-le").ljust(4 * n, b"\x00")
    else:
        out += struct.pack("<%d%s" % (len(values), code[descr]), *values)
    return out


def tensor(a, descr):
    return ("t", flat(a), descr, shape_of(a))


def scalar(v, descr):
    return ("t", [v], descr, ())


def text(s):
    return ("t", [s], "<U%d" % max(1, len(s)), ())


def write_npz(path, arrays, compress=False):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, (_, vals, descr, shp) in arrays.items():
            if descr == "bf16":
                vals = [bf16_bits(v) for v in vals]
                descr = "<u2"
            z.writestr(name + ".npy", npy(vals, descr, shp))


def rand_tensor(rng, shape, rnd=f16, sd=1.0):
    if len(shape) == 1:
        return [rnd(rng.gauss(0, sd)) for _ in range(shape[0])]
    return [rand_tensor(rng, shape[1:], rnd, sd) for _ in range(shape[0])]


def attention_rows(q, k):
    """The shapes of q [B,H,Sq,D] and k [B,Hkv,Sk,D], zeroed out [B,H,Sq,D] and lse [B,H,Sq],
    and every query row as (b, h, its K/V head, i)."""
    B, H, Sq, D = len(q), len(q[0]), len(q[0][0]), len(q[0][0][0])
    Hkv, Sk = len(k[0]), len(k[0][0])
    out = [[[[0.0] * D for _ in range(Sq)] for _ in range(H)] for _ in range(B)]
    lse = [[[0.0] * Sq for _ in range(H)] for _ in range(B)]
    rows = [(b, h, h // (H // Hkv), i) for b in range(B) for h in range(H) for i in range(Sq)]
    return (Sq, Sk, D), out, lse, rows


def causally_masked(causal, i, j, Sq, Sk):
    """Whether key j is masked for row i: causal None, 'tl' (top-left) or 'br' (bottom-right)."""
    return (causal == "tl" and j > i) or (causal == "br" and j > i + Sk - Sq)


def attention(q, k, v, scale=None, causal=None, mask=None, softcap=None, window=None):
    """q [B,H,Sq,D], k,v [B,Hkv,Sk,D] nested lists of doubles. causal: None, 'tl', 'br'.
    mask: function (b,h,i,j)->bias (may be -inf) or None. returns out, lse (natural)."""
    (Sq, Sk, D), out, lse, rows = attention_rows(q, k)
    if scale is None:
        scale = 1 / math.sqrt(D)
    for b, h, hk, i in rows:
        s = []
        for j in range(Sk):
            x = scale * sum(q[b][h][i][d] * k[b][hk][j][d] for d in range(D))
            if softcap:
                x = softcap * math.tanh(x / softcap)
            if mask:
                x += mask(b, h, i, j)
            if causally_masked(causal, i, j, Sq, Sk):
                x = -math.inf
            s.append(x)
        m = max(s)
        if m == -math.inf:
            lse[b][h][i] = -math.inf
            continue
        p = [math.exp(x - m) for x in s]
        l = sum(p)
        lse[b][h][i] = m + math.log(l)
        for d in range(D):
            out[b][h][i][d] = sum(p[j] * v[b][hk][j][d] for j in range(Sk)) / l
    return out, lse


def mapt(a, fn):
    if isinstance(a, list):
        return [mapt(x, fn) for x in a]
    return fn(a)


def run(*args):
    import subprocess
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def case(name, B=1, H=1, Sq=16, Sk=16, D=64, Hkv=None, dt="f16", seed=0, causal=None, mask=None,
         scale=None, write_scale=False, softcap=None, out_round=None, tamper=None, lse=True, lse_fn=None,
         extra=None, store_scale=None):
    """build a capture; returns path."""
    rng = random.Random(seed)
    Hkv = Hkv or H
    rnd = {"f16": f16, "bf16": bf16, "f32": f32}[dt]
    q = rand_tensor(rng, (B, H, Sq, D), rnd)
    k = rand_tensor(rng, (B, Hkv, Sk, D), rnd)
    v = rand_tensor(rng, (B, Hkv, Sk, D), rnd)
    out, l = attention(q, k, v, scale, causal if causal != "tl_as_is_causal" else "tl", mask, softcap)
    if out_round is None:
        out_round = lambda x: rnd(f32(x))
    o = mapt(out, out_round)
    if tamper:
        tamper(o, l, q, k, v)
    descr = {"f16": "<f2", "bf16": "bf16", "f32": "<f4"}[dt]
    arrays = {"q": tensor(q, descr), "k": tensor(k, descr), "v": tensor(v, descr)}
    if dt == "bf16":
        arrays["dtype"] = text("bfloat16")
    arrays["is_causal"] = scalar(causal in ("tl", "tl_as_is_causal"), "|b1")
    if write_scale or store_scale is not None:
        arrays["scale"] = scalar(store_scale if store_scale is not None else scale, "<f8")
    if softcap:
        arrays["softcap"] = scalar(softcap, "<f8")
    arrays["out"] = tensor(o, descr)
    if lse:
        ll = mapt(l, lse_fn or f32)
        arrays["lse"] = tensor(ll, "<f4")
    if extra:
        arrays.update(extra)
    path = os.path.join(OUT, name + ".npz")
    write_npz(path, arrays)
    return path
