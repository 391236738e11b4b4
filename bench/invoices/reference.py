"""Invoices and the simulated reference model that reads them: invoice text → ``{invoice_no, total,
currency, due_date}``.

**Corpus** (:func:`invoices`, seeded): one short invoice per item, from a vendor with a city, an
invoice number ``INV-<5 digits>``, an issue date and a due date (ISO ``YYYY-MM-DD``), a subtotal,
a tax line and the total, in one of a few layouts and phrasings, a line naming the currency
by its ISO code (``Amounts in EUR.``) or, for most dollar invoices (:data:`SYMBOL_SHARE`), only as
``Amounts in dollars.``, which leaves US and Canadian dollars to be told apart by the vendor's city.

**Reading** (:func:`read_invoice`, noise-free): the invoice number as written; the due date (not
the issue date); the total (not the subtotal), a float rounded to cents; the currency: the code
written, else (``dollars``) ``CAD`` from a Canadian city and ``USD`` otherwise.

**Simulated reference** (:func:`reference_reply`): the reading as a JSON reply, except that on an
invoice whose currency is ambiguous (``dollars`` from a Canadian city) it answers ``USD`` with
probability :data:`AMBIGUOUS_FLIP` per call (a sampled answer, so the same invoice can get both).
This is a model of an LLM chosen for testing Auto, not a measurement of any real model.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

VENDORS = ("Northwind Supplies", "Acme Tools", "Blue Harbor Print", "Kestrel Logistics", "Maple Office Co",
           "Orchid Foods", "Granite Hardware", "Lumen Lighting", "Harbor Freight Lines", "Pine Ridge Paper")
CITIES = {"USD": ("Chicago", "Denver", "Austin", "Boston", "Seattle", "Atlanta"),
          "CAD": ("Toronto", "Calgary", "Montreal", "Ottawa", "Vancouver", "Halifax"),
          "EUR": ("Berlin", "Lyon", "Milan", "Porto", "Utrecht"),
          "GBP": ("Leeds", "Bristol", "Glasgow"),
          "CHF": ("Zurich", "Basel", "Geneva")}
CURRENCY_SHARE = (("USD", 0.45), ("CAD", 0.15), ("EUR", 0.2), ("GBP", 0.12), ("CHF", 0.08))
SYMBOL_SHARE = 0.2
"""The share of dollar invoices (US or Canadian) that say ``Amounts in dollars.`` rather than name
``USD`` / ``CAD``."""
AMBIGUOUS_FLIP = 0.25
"""Per call, the chance the simulated reference reads a Canadian ``dollars`` invoice as ``USD``."""

SYSTEM_PROMPT = ("You read supplier invoices and reply with one JSON object: invoice_no (as written), total "
                 "(the amount to pay, a number), currency (ISO code), due_date (YYYY-MM-DD).")


@dataclass(frozen=True)
class Invoice:
    text: str
    label: dict


def _money(v: float) -> str:
    return f"{v:,.2f}"


def _date(rng: random.Random) -> tuple[str, str]:
    m, d = rng.randint(1, 11), rng.randint(1, 28)
    return f"2026-{m:02d}-{d:02d}", f"2026-{m + 1:02d}-{d:02d}"


def _invoice(rng: random.Random) -> Invoice:
    cur = rng.choices([c for c, _ in CURRENCY_SHARE], [w for _, w in CURRENCY_SHARE])[0]
    vendor, city = rng.choice(VENDORS), rng.choice(CITIES[cur])
    no = f"INV-{rng.randint(10000, 99999)}"
    issued, due = _date(rng)
    sub = round(rng.uniform(20, 5000), 2)
    tax = round(sub * rng.choice((0.05, 0.08, 0.13, 0.2)), 2)
    total = round(sub + tax, 2)
    symbol = cur in ("USD", "CAD") and rng.random() < SYMBOL_SHARE
    unit = "Amounts in dollars." if symbol else f"Amounts in {cur}."
    layout = rng.randrange(3)
    if layout == 0:
        lines = [f"Invoice {no}", f"{vendor}, {city}", f"Issued: {issued}",
                 f"Subtotal: {_money(sub)}", f"Tax: {_money(tax)}", f"Total: {_money(total)}",
                 unit, f"Due: {due}"]
    elif layout == 1:
        lines = [f"{vendor} ({city})", f"Invoice number {no}, issued {issued}.",
                 f"Subtotal {_money(sub)} plus tax {_money(tax)}. {unit}",
                 f"Total: {_money(total)}, payment due {due}"]
    else:
        lines = [f"From: {vendor}, {city}", f"Ref {no}", f"Date {issued}", unit,
                 f"Net {_money(sub)} / Tax {_money(tax)} / Total: {_money(total)}",
                 f"Please pay by {due}"]
    return Invoice("\n".join(lines), {"invoice_no": no, "total": total, "currency": cur, "due_date": due})


def invoices(n: int, seed: int) -> list[Invoice]:
    """``n`` invoices drawn with ``seed`` (the same seed gives the same invoices)."""
    rng = random.Random(seed)
    return [_invoice(rng) for _ in range(n)]


def read_invoice(text: str) -> dict:
    """The noise-free reading of an invoice made by :func:`invoices` (module docstring)."""
    import re

    no = re.search(r"INV-\d{5}", text)
    dates = re.findall(r"\d{4}-\d{2}-\d{2}", text)
    total = re.search(r"Total: ([\d,]+\.\d\d)", text)
    code = re.search(r"Amounts in ([A-Z]{3})\.", text)
    if code:
        cur = code.group(1)
    else:
        cur = "CAD" if any(c in text for c in CITIES["CAD"]) else "USD"
    return {"invoice_no": no.group(0) if no else None,
            "total": round(float(total.group(1).replace(",", "")), 2) if total else None,
            "currency": cur, "due_date": dates[-1] if dates else None}


def reference_reply(text: str, rng: random.Random) -> str:
    """The simulated reference model's reply to an invoice: the JSON text of its reading, the
    ambiguous currency sampled (module docstring)."""
    ans = read_invoice(text)
    if ans["currency"] == "CAD" and rng.random() < AMBIGUOUS_FLIP:
        ans["currency"] = "USD"
    return json.dumps(ans)


__all__ = ["AMBIGUOUS_FLIP", "CITIES", "SYMBOL_SHARE", "Invoice", "SYSTEM_PROMPT", "invoices", "read_invoice", "reference_reply"]
