"""The file citations of an answer written after file searches."""

from __future__ import annotations

from ferryman.services.responses.citations import Source, Sources


def _result(file_id: str, filename: str) -> Source:
    return Source(file_id=file_id, filename=filename)


def _sources(*searches: list[Source]) -> Sources:
    sources = Sources()
    for results in searches:
        sources.add_search(results)
    return sources


def test_numbered_markers_cite_the_passages_of_the_latest_search() -> None:
    sources = _sources([_result("f-old", "old.txt")], [_result("f-a", "a.txt"), _result("f-b", "b.txt")])
    text = "Ferries leave at nine [2] and return at five [1]. See [7]."

    cited = sources.citations(text)

    assert [(c["file_id"], c["index"]) for c in cited] == [
        ("f-b", text.index("[2]") + 3),
        ("f-a", text.index("[1]") + 3),
    ]
    assert all(c["type"] == "file_citation" and c["filename"] in ("a.txt", "b.txt") for c in cited)


def test_a_named_file_is_cited_after_its_name() -> None:
    sources = _sources([_result("f-a", "timetable.md")])
    text = "According to timetable.md, the first ferry leaves at nine."

    assert sources.citations(text) == [
        {"type": "file_citation", "file_id": "f-a", "filename": "timetable.md", "index": text.index(",")}
    ]


def test_an_answer_citing_nothing_is_annotated_with_every_file_found_at_its_end() -> None:
    sources = _sources([_result("f-a", "a.txt"), _result("f-a", "a.txt"), _result("f-b", "b.txt")])
    text = "The first ferry leaves at nine."

    cited = sources.citations(text)

    assert [(c["file_id"], c["index"]) for c in cited] == [("f-a", len(text)), ("f-b", len(text))]


def test_nothing_is_cited_when_no_search_found_anything() -> None:
    assert _sources([]).citations("No file says [1].") == []
    assert Sources().citations("An answer without any search.") == []


def test_web_pages_are_cited_over_their_marker_or_url() -> None:
    page = Source(url="https://ferries.example/timetable", title="Timetable")
    sources = _sources([page])
    text = "The first ferry leaves at nine [1]; see https://ferries.example/timetable."

    cited = sources.citations(text)

    marker, url = text.index("[1]"), text.index("https://")
    assert cited == [
        {"type": "url_citation", "url": page.url, "title": "Timetable", "start_index": marker, "end_index": marker + 3},
        {"type": "url_citation", "url": page.url, "title": "Timetable", "start_index": url, "end_index": url + 33},
    ]
