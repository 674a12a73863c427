"""Element types a tensor can hold, with the facts codegen and the cost model need."""

from __future__ import annotations

from enum import Enum

import numpy as np


class Dtype(Enum):
    U8 = ("u8", 1, "uint8_t", "uint8")
    I8 = ("i8", 1, "int8_t", "int8")
    U16 = ("u16", 2, "uint16_t", "uint16")
    I16 = ("i16", 2, "int16_t", "int16")
    U32 = ("u32", 4, "uint32_t", "uint32")
    I32 = ("i32", 4, "int32_t", "int32")
    F32 = ("f32", 4, "float", "float32")
    # bf16 is stored as raw 16-bit words; numpy has no bf16, so arrays carry uint16.
    BF16 = ("bf16", 2, "uint16_t", "uint16")

    def __init__(self, short: str, nbytes: int, c_type: str, np_name: str):
        self.short = short
        self.nbytes = nbytes
        self.c_type = c_type
        self.np_dtype = np.dtype(np_name)

    def __str__(self) -> str:
        return self.short

    @property
    def is_float(self) -> bool:
        return self in (Dtype.F32, Dtype.BF16)

    @classmethod
    def choices(cls) -> str:
        return ", ".join(d.short for d in cls)

    @classmethod
    def parse(cls, text: str) -> Dtype:
        for d in cls:
            if d.short == text:
                return d
        raise ValueError(f"unknown dtype {text!r}; expected one of {cls.choices()}")
