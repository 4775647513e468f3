"""Energy between technology nodes: Stillmaker & Baas' scaling equations, and the classical rule.

eatt power measures the logic at the Liberty's node (OSU 0.18 um, 1.8 V) and prices the memory
macros with CACTI at one of its nodes (22-90 nm, rtl_sim/memory_energy.py); the total is stated
at one node, the Liberty's, so the memories' energies are scaled to it.

Stillmaker & Baas, "Scaling equations for the accurate prediction of CMOS device performance
from 180 nm to 7 nm", Integration 58:74-81 (2017), fit the energy of a fixed circuit at each
node as a quadratic in the supply, E(node, V) = a V^2 + b V + c (their Table 4; bulk CMOS down
to 65 nm, high-performance (HP) and low-power (LP) devices below). A factor between two
(node, supply) points is E(to) / E(from). :data:`COEFFICIENTS` holds the paper's energy
coefficients; the LP rows are used below 65 nm, matching CACTI's low-standby-power devices,
and CACTI's 22 nm node takes the paper's 20 nm row (the nearest it has).

The classical rule, energy ~ C V^2 with C ~ feature size, is kept beside it for comparison:
from CACTI's 90 nm / 1.3 V to 180 nm / 1.8 V it gives 3.83x where the equations give 6.72x.

Why our own: a table lookup and a quadratic; the paper's numbers are the substance.
"""

from __future__ import annotations

SOURCE = "Stillmaker & Baas, Integration 58 (2017), energy equations (Table 4)"
CLASSICAL = "classical: energy ~ feature size x Vdd^2"
#: (a, b, c) of E = a V^2 + b V + c, by node (nm) and device flavour
COEFFICIENTS = {
    (180, "bulk"): (0.0, 24.64, -17.98),
    (130, "bulk"): (7.171, -6.709, 2.904),
    (90, "bulk"): (4.762, -4.781, 2.092),
    (65, "bulk"): (3.755, -4.398, 1.975),
    (45, "LP"): (1.103, -0.362, 0.2767),
    (32, "LP"): (0.9559, -0.7823, 0.471),
    (20, "LP"): (0.2632, -0.14, 0.06841),
    (16, "LP"): (0.2139, -0.1187, 0.05639),
    (14, "LP"): (0.1556, -0.06472, 0.03066),
    (10, "LP"): (0.1261, -0.0518, 0.02769),
    (7, "LP"): (0.09365, -0.03409, 0.02043),
}
#: CACTI's nodes the paper does not have: the row used instead
NEAREST = {22: 20}


def _row(node_nm: float) -> tuple[float, float, float]:
    node = NEAREST.get(int(node_nm), int(node_nm))
    for flavour in ("bulk", "LP"):
        if (node, flavour) in COEFFICIENTS:
            return COEFFICIENTS[(node, flavour)]
    nodes = sorted({n for n, _ in COEFFICIENTS})
    raise ValueError(f"no scaling equation for {node_nm} nm (nodes: {nodes})")


def energy(node_nm: float, vdd: float) -> float:
    """The paper's relative energy of its circuit at (node, supply)."""
    a, b, c = _row(node_nm)
    value = a * vdd**2 + b * vdd + c
    if value <= 0:
        raise ValueError(f"{node_nm} nm at {vdd} V: outside the equation's range")
    return value


def factor(from_nm: float, from_vdd: float, to_nm: float, to_vdd: float) -> float:
    """Energy at (to_nm, to_vdd) over energy at (from_nm, from_vdd), by the equations."""
    return energy(to_nm, to_vdd) / energy(from_nm, from_vdd)


def classical_factor(from_nm: float, from_vdd: float, to_nm: float, to_vdd: float) -> float:
    return (to_nm / from_nm) * (to_vdd / from_vdd) ** 2


def has_equation(node_nm: float) -> bool:
    try:
        _row(node_nm)
    except ValueError:
        return False
    return True
