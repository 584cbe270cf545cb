from fractions import Fraction

import pytest
from podfit.k8s.quantity import QuantityError, milli_value, parse_quantity, whole_value


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        pytest.param("500m", 500, 1, id="millicores round up to one whole unit"),
        pytest.param("2", 2000, 2, id="whole cores"),
        pytest.param("0.5", 500, 1, id="decimal cores"),
        pytest.param("1500m", 1500, 2, id="millicores above one core"),
        pytest.param("0.0001", 1, 1, id="sub-milli amounts round up to one milli"),
        pytest.param("1Ki", 1024000, 1024, id="binary kibi suffix"),
        pytest.param("512Mi", 512 * 2**20 * 1000, 512 * 2**20, id="binary mebi suffix"),
        pytest.param("4Gi", 4 * 2**30 * 1000, 4 * 2**30, id="binary gibi suffix"),
        pytest.param("1k", 1_000_000, 1000, id="decimal kilo suffix"),
        pytest.param("1M", 10**9, 10**6, id="decimal mega suffix"),
        pytest.param("8254377984", 8254377984000, 8254377984, id="plain bytes"),
        pytest.param("1e3", 10**6, 1000, id="decimal exponent"),
        pytest.param("1E-3", 1, 1, id="negative decimal exponent"),
        pytest.param("100n", 1, 1, id="nano suffix rounds up"),
        pytest.param("+1", 1000, 1, id="explicit plus sign"),
        pytest.param(".5", 500, 1, id="leading dot"),
        pytest.param("-1", -1000, -1, id="negative quantities parse"),
    ],
)
def test_parse_quantity(text: str, milli: int, whole: int) -> None:
    value = parse_quantity(text)
    assert milli_value(value) == milli
    assert whole_value(value) == whole


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty string"),
        pytest.param("abc", id="letters only"),
        pytest.param("1.2.3", id="two decimal points"),
        pytest.param("1Gb", id="unknown suffix"),
        pytest.param(" 1", id="leading whitespace"),
        pytest.param("1 ", id="trailing whitespace"),
        pytest.param("1Ki1", id="suffix followed by digits"),
        pytest.param("m", id="suffix without a number"),
    ],
)
def test_malformed_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_numbers_from_json_are_accepted_exactly() -> None:
    assert parse_quantity(3) == Fraction(3)
    assert parse_quantity(0.25) == Fraction(1, 4)
    with pytest.raises(QuantityError):
        parse_quantity(True)
