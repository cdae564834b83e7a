"""How a tool's output is cut to the configured limit, with a note the model reads."""

from __future__ import annotations

from ferryman.api.content import ImageContentItem, ImageSource, TextContentItem
from ferryman.engine.tool_step import truncate


def test_text_within_the_limit_is_kept_whole() -> None:
    assert truncate("abc", 3) == ("abc", False)


def test_longer_text_is_cut_with_a_note_naming_both_sizes() -> None:
    assert truncate("abcdef", 4) == ("abcd\n[output truncated: 4 of 6 characters shown]", True)


def test_text_items_share_the_limit_and_images_pass() -> None:
    image = ImageContentItem(image=ImageSource(data="AAAA"))
    content = [TextContentItem(text="abc"), image, TextContentItem(text="defgh"), TextContentItem(text="ij")]
    cut, truncated = truncate(content, 5)
    assert truncated is True
    assert cut == [
        TextContentItem(text="abc"),
        image,
        TextContentItem(text="de"),
        TextContentItem(text="[output truncated: 5 of 10 characters shown]"),
    ]


def test_a_single_item_is_treated_as_a_list() -> None:
    cut, truncated = truncate(TextContentItem(text="abcdef"), 2)
    assert truncated is True
    assert cut == [TextContentItem(text="ab"), TextContentItem(text="[output truncated: 2 of 6 characters shown]")]
