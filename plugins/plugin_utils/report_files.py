# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The files of fabric_validate's report that a machine reads, written with Python's own serialisers: junit.xml with
xml.etree.ElementTree (valid XML whatever a message holds: tool output may carry control characters XML 1.0 cannot
represent, which are replaced), and the Markdown escaping of summary.md's table cells."""

import re
import xml.etree.ElementTree as ET

# Characters XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets): C0 controls but tab, LF and CR; surrogates;
# U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value):
    """str(value) with the characters XML 1.0 cannot hold replaced by U+FFFD; None is ''."""
    return _NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _with_unit(value, unit):
    """A measured value or threshold with its unit; a value that is missing (nothing was measured) says so."""
    if value is None:
        return "nothing"
    return f"{xml_text(value)} {unit}" if unit else xml_text(value)


def junit_xml(report, comment=""):
    """JUnit XML of the report: one testsuite per tier, one testcase per check (classname: host, name: check)."""
    checks = report.get("checks") or []
    summary = report.get("summary") or {}
    root = ET.Element(
        "testsuites",
        name=xml_text(f"fabric_validate {report.get('run_id', '')}"),
        tests=str(len(checks)),
        failures=str(summary.get("failed", 0)),
        skipped=str(summary.get("skipped", 0)),
    )
    for tier in report.get("tiers") or []:
        tier_checks = [c for c in checks if c.get("tier") == tier]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=xml_text(f"fabric_validate.{tier}"),
            tests=str(len(tier_checks)),
            failures=str(sum(c.get("status") == "failed" for c in tier_checks)),
            skipped=str(sum(c.get("status") == "skipped" for c in tier_checks)),
        )
        for check in tier_checks:
            case = ET.SubElement(
                suite, "testcase", classname=xml_text(check.get("host")), name=xml_text(check.get("check"))
            )
            message = xml_text(check.get("message"))
            if check.get("status") == "failed":
                failure = ET.SubElement(case, "failure", message=message)
                unit = check.get("unit")
                measured, threshold = (_with_unit(check.get(key), unit) for key in ("measured", "threshold"))
                failure.text = f"measured {measured}, threshold {threshold}"
            elif check.get("status") == "skipped":
                ET.SubElement(case, "skipped", message=message)
            else:
                ET.SubElement(case, "system-out").text = message
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if comment:
        head += f"<!-- {xml_text(comment).replace('--', '- -')} -->\n"
    return head + text + "\n"


def markdown_cell(value):
    """Text that stays one cell of a Markdown table and shows literally: | and \\ escaped, line breaks as <br>, and
    the HTML specials as entities (tool output is not markup). None is ''."""
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return re.sub(r"\r\n|\r|\n", "<br>", text)
