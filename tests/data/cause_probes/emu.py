"""Emulated flash-attention kernels with legit arithmetic variants."""
from lib import *
import math

LOG2E = 1.4426950408889634

def fsum32(xs, order="fwd"):
    if order == "rev": xs = xs[::-1]
    if order == "pair":
        xs = [f32(x) for x in xs]
        while len(xs) > 1:
            xs = [f32(xs[i] + xs[i+1]) if i+1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
        return xs[0] if xs else 0.0
    a = 0.0
    for x in xs: a = f32(a + x)
    return a

def fsum16(xs):
    a = 0.0
    for x in xs: a = f16(a + x)
    return a

def flash(q, k, v, scale=None, causal=None, tile=64, prnd=f16, ornd=f16, order="fwd", acc="f32", exp2=True, split_d=None, prescale=None, srnd=None):
    (Sq, Sk, D), out, lse, rows = attention_rows(q, k)
    if scale is None: scale = 1 / math.sqrt(D)
    sc = f32(scale * LOG2E) if exp2 else f32(scale)
    if prescale:
        q = mapt(q, lambda x: prescale(x * sc)); sc = 1.0
    if srnd is None: srnd = lambda x: x
    add = fsum32 if acc == "f32" else fsum16
    for b, h, hk, i in rows:
        m = -math.inf; l = 0.0; o = [0.0]*D
        for t0 in range(0, Sk, tile):
            js = range(t0, min(Sk, t0+tile))
            s = []
            for j in js:
                x = srnd(fsum32([q[b][h][i][d]*k[b][hk][j][d] for d in range(D)], order))
                if causally_masked(causal, i, j, Sq, Sk): x = -math.inf
                s.append(x)
            mt = max([m] + s)
            if mt == -math.inf: continue
            if exp2:
                p = [f32(2.0 ** f32(f32(x*sc) - f32(mt*sc))) if x != -math.inf else 0.0 for x in s]
                alpha = f32(2.0 ** f32(f32(m*sc) - f32(mt*sc))) if m != -math.inf else 0.0
            else:
                p = [f32(math.exp(f32(f32(x - mt)*sc))) if x != -math.inf else 0.0 for x in s]
                alpha = f32(math.exp(f32(f32(m - mt)*sc))) if m != -math.inf else 0.0
            l = f32(f32(l*alpha) + fsum32(p, order))
            pr = [prnd(x) for x in p]
            for d in range(D):
                o[d] = f32(f32(o[d]*alpha) + add([pr[jj]*v[b][hk][j][d] for jj, j in enumerate(js)]))
            m = mt
        if m == -math.inf:
            lse[b][h][i] = -math.inf; continue
        inv = f32(1.0/l)
        out[b][h][i] = [ornd(f32(o[d]*inv)) for d in range(D)]
        lse[b][h][i] = f32(f32(m*sc)/LOG2E + math.log(l)) if exp2 else f32(m*scale + math.log(l))
    return out, lse

def emu_case(name, B=1, H=1, Sq=16, Sk=16, D=64, Hkv=None, dt="f16", seed=0, causal=None, scale=None,
             write_scale=False, sd=1.0, tamper=None, extra=None, **kw):
    rng = random.Random(seed)
    Hkv = Hkv or H
    rnd = {"f16": f16, "bf16": bf16, "f32": f32}[dt]
    q = rand_tensor(rng, (B, H, Sq, D), rnd, sd)
    k = rand_tensor(rng, (B, Hkv, Sk, D), rnd, sd)
    v = rand_tensor(rng, (B, Hkv, Sk, D), rnd)
    kw.setdefault("prnd", rnd); kw.setdefault("ornd", rnd)
    o, l = flash(q, k, v, scale, causal, **kw)
    if tamper: tamper(o, l, q, k, v)
    descr = {"f16": "<f2", "bf16": "bf16", "f32": "<f4"}[dt]
    arrays = {"q": tensor(q, descr), "k": tensor(k, descr), "v": tensor(v, descr)}
    if dt == "bf16": arrays["dtype"] = text("bfloat16")
    arrays["is_causal"] = scalar(causal == "tl", "|b1")
    if write_scale: arrays["scale"] = scalar(scale, "<f8")
    arrays["out"] = tensor(o, descr)
    arrays["lse"] = tensor(l, "<f4")
    if extra: arrays.update(extra)
    path = os.path.join(OUT, name + ".npz")
    write_npz(path, arrays)
    return path
