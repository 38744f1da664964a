"""Text tools: normalization, numbers, sentence and claim segmentation."""
