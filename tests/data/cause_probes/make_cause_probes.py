# Writes the captures of tests/test_check.cpp's "causes are not fitted to noise" cases into
# tests/data (pure python, no numpy): a correct fp16 output with random noise of 6 to 12 units
# in the last place (a factor fitted on one element "explained" it), a kernel whose scores
# are rounded to fp16 and that drops no key (a key chosen among all "explained" it), and an
# output with the scale 1/D where 1/sqrt(D) is meant, on small inputs (many elements only a
# bound or two off). They came from a helper's probe of `check` (2026-11-27).
import math, os, random, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import *
from emu import emu_case

for seed in (2, 3):
    rng2 = random.Random(100 + seed)
    def noise(o, l, q, k, v):
        for i in range(len(o[0][0])):
            for d in range(len(o[0][0][i])):
                x = o[0][0][i][d]
                u = 2 ** (math.floor(math.log2(abs(x))) - 10) if x else 2**-24
                o[0][0][i][d] = f16(x + rng2.choice((-1, 1)) * rng2.randint(6, 12) * u)
    os.replace(case("noise_s%d_u12" % seed, Sq=16, Sk=256, D=64, seed=seed, tamper=noise, lse=False),
               os.path.join(OUT, "check_noise_s%d.npz" % seed))

os.replace(emu_case("scores16_sd2_D64", Sq=16, Sk=256, D=64, sd=2.0, exp2=False, srnd=f16),
           os.path.join(OUT, "check_fp16_scores.npz"))

D, Sq, Sk = 64, 16, 64
rng = random.Random(5)
q = rand_tensor(rng, (1, 1, Sq, D), f16, 0.3); k = rand_tensor(rng, (1, 1, Sk, D), f16, 0.3); v = rand_tensor(rng, (1, 1, Sk, D))
bad, lb = attention(q, k, v, scale=1.0 / D)
write_npz(os.path.join(OUT, "check_scale_over_d.npz"),
          {"q": tensor(q, "<f2"), "k": tensor(k, "<f2"), "v": tensor(v, "<f2"),
           "out": tensor(mapt(bad, lambda x: f16(f32(x))), "<f2"), "lse": tensor(mapt(lb, f32), "<f4")})
