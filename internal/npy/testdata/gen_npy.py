# Writes the .npy fixtures npy_test.go reads, with NumPy's own writer:
#   cd internal/npy/testdata && python3 gen_npy.py
import numpy as np
from numpy.lib import format as npf

def save(name, a, version=None):
    with open(name, "wb") as f:
        npf.write_array(f, a, version=version, allow_pickle=False)

save("f4_2x3.npy", np.array([[1.5, -2, 0], [3.25, 1e-30, -0.0]], dtype="<f4"))
save("f8_3.npy", np.array([0.1, -1e300, 2.5], dtype="<f8"))
save("i8_3.npy", np.array([-(2**63), 7, 2**63 - 1], dtype="<i8"))
save("i4_2x2_v2.npy", np.array([[1, -2], [3, 2**31 - 1]], dtype="<i4"), version=(2, 0))
save("u1_0d_v3.npy", np.array(200, dtype="|u1"), version=(3, 0))
save("i1_4.npy", np.array([-128, -1, 0, 127], dtype="|i1"))
save("f4_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
save("f4_bigendian.npy", np.arange(3, dtype=">f4"))
