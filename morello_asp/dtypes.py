"""Element types a tensor can hold, with the facts codegen and the cost model need."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


_NP_DTYPES: dict[str, np.dtype] = {}


class Dtype(Enum):
    U8 = ("u8", 1, "uint8_t", "uint8")
    I8 = ("i8", 1, "int8_t", "int8")
    U16 = ("u16", 2, "uint16_t", "uint16")
    I16 = ("i16", 2, "int16_t", "int16")
    U32 = ("u32", 4, "uint32_t", "uint32")
    I32 = ("i32", 4, "int32_t", "int32")
    F32 = ("f32", 4, "float", "float32")
    # bf16: numpy arrays of ml_dtypes.bfloat16; C sees the raw 16-bit words (uint16_t).
    BF16 = ("bf16", 2, "uint16_t", "bfloat16")

    def __init__(self, short: str, nbytes: int, c_type: str, np_name: str):
        self.short = short
        self.nbytes = nbytes
        self.c_type = c_type
        self.np_name = np_name

    @property
    def np_dtype(self) -> np.dtype:
        """The numpy dtype of the values (numpy and ml_dtypes are imported on first use:
        a `query` needs neither)."""
        d = _NP_DTYPES.get(self.np_name)
        if d is None:
            import numpy as np

            if self.np_name == "bfloat16":
                import ml_dtypes

                d = np.dtype(ml_dtypes.bfloat16)
            else:
                d = np.dtype(self.np_name)
            _NP_DTYPES[self.np_name] = d
        return d

    def __str__(self) -> str:
        return self.short

    @property
    def is_float(self) -> bool:
        return self in (Dtype.F32, Dtype.BF16)

    @property
    def is_signed(self) -> bool:
        return not self.short.startswith("u")

    @property
    def raw_dtype(self) -> np.dtype:
        """The numpy dtype of the C buffer's words: the same as np_dtype except for bf16,
        whose words are uint16 (the raw bits a caller may also pass)."""
        import numpy as np

        return np.dtype(np.uint16) if self is Dtype.BF16 else self.np_dtype

    @classmethod
    def choices(cls) -> str:
        return ", ".join(d.short for d in cls)

    @classmethod
    def parse(cls, text: str) -> Dtype:
        for d in cls:
            if d.short == text:
                return d
        raise ValueError(f"unknown dtype {text!r}; expected one of {cls.choices()}")
