"""The text of uploaded files: each kind read, and the files that cannot be."""

from __future__ import annotations

import io
import json

import pypdf
import pytest

from ferryman.knowledge.extract import UnreadableFile, extract_text


def pdf_with_text(*pages: str) -> bytes:
    """A minimal PDF whose pages show ``pages`` in Helvetica, written by hand (pypdf cannot lay out text)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for text in pages:
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        page_number, content_number = len(objects) + 1, len(objects) + 2
        kids.append(f"{page_number} 0 R")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_number} 0 R "
            "/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def blank_pdf(password: str | None = None) -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(612, 792)
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def unreadable(data: bytes, filename: str, mime_type: str | None = None) -> UnreadableFile:
    with pytest.raises(UnreadableFile) as caught:
        extract_text(data, filename, mime_type)
    return caught.value


def test_plain_text_and_markdown_are_read_as_they_are() -> None:
    assert extract_text(b"# Title\n\nSome *markdown*.", "notes.md", None) == "# Title\n\nSome *markdown*."
    assert extract_text("naïve café".encode(), "a.txt", "text/plain") == "naïve café"
    assert extract_text(b"print('hi')", "script.py", None) == "print('hi')"
    assert extract_text(b"no extension", "README", "text/x-readme") == "no extension"


def test_byte_order_marks_and_legacy_encodings_are_decoded() -> None:
    assert extract_text("\ufeffwith BOM".encode(), "a.txt", None) == "with BOM"
    assert extract_text("utf-16 text".encode("utf-16"), "a.txt", None) == "utf-16 text"
    assert extract_text("café “quoted”".encode("cp1252"), "a.txt", None) == "café “quoted”"


def test_html_gives_its_visible_text() -> None:
    page = b"""<?xml version="1.0"?><html><head><title>The Title</title><style>p { color: red }</style></head>
    <body><h1>Heading</h1><p>Hello <b>bold</b>&nbsp;world<br>next line</p>
    <script>alert('hidden')</script><ul><li>one</li><li>two</li></ul></body></html>"""
    text = extract_text(page, "page.html", None)
    assert text.startswith("The Title\n\nHeading\n\nHello bold world\nnext line")
    assert "one" in text and "two" in text
    assert "alert" not in text and "color" not in text
    assert extract_text(b"just words", "a.htm", None) == "just words"


def test_json_gives_the_text_of_its_values() -> None:
    document = {"title": "Ferry", "stops": [{"name": "North", "open": True}, "South"], "notes": None}
    text = extract_text(json.dumps(document).encode(), "data.json", None)
    assert text == "title: Ferry\nstops:\n  - name: North\n    open: true\n  - South\nnotes: null"
    assert extract_text(b'{"a": 1}\n{"a": 2}\n', "rows.jsonl", None) == "a: 1\n\na: 2"
    assert unreadable(b"{not json", "bad.json").code == "invalid_file"


def test_csv_rows_become_lines_of_named_values() -> None:
    data = b'name,port,note\nAurora,Oslo,"big, fast"\nBreeze,Kiel,\n'
    assert (
        extract_text(data, "ferries.csv", None) == "name: Aurora; port: Oslo; note: big, fast\nname: Breeze; port: Kiel"
    )
    assert extract_text(b"a\tb\n1\t2\n", "t.tsv", None) == "a: 1; b: 2"
    assert extract_text(b"a,b\n1,2\n", "upload", "text/csv") == "a: 1; b: 2"


def test_pdf_text_is_read_page_by_page() -> None:
    data = pdf_with_text("First page text", "Second page text")
    assert extract_text(data, "doc.pdf", None) == "First page text\n\nSecond page text"
    assert extract_text(data, "upload", "application/pdf") == "First page text\n\nSecond page text"
    assert extract_text(data, "upload", None) == "First page text\n\nSecond page text"


def test_pdfs_without_text_encrypted_or_broken_are_invalid() -> None:
    no_text = unreadable(blank_pdf(), "scan.pdf")
    assert no_text.code == "invalid_file" and "no text layer" in no_text.message
    encrypted = unreadable(blank_pdf(password="secret"), "locked.pdf")
    assert encrypted.code == "invalid_file" and "encrypted" in encrypted.message
    broken = unreadable(pdf_with_text("cut short")[:60], "broken.pdf")
    assert broken.code == "invalid_file"


def test_empty_binary_and_unknown_files_are_refused() -> None:
    assert unreadable(b"", "empty.txt").message == "empty file"
    assert unreadable(b"   \n", "blank.txt").code == "invalid_file"
    assert unreadable(bytes(range(256)) * 4, "junk.txt").code == "invalid_file"
    assert unreadable(b"\x01\x02\x03 binary \x04\x05\x06" * 10, "junk.md").code == "invalid_file"
    unknown = unreadable(b"PK\x03\x04...", "slides.pptx", "application/octet-stream")
    assert unknown.code == "unsupported_file" and ".pptx" in unknown.message
    assert unreadable(b"data", "upload", None).code == "unsupported_file"
