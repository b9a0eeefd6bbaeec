//! Audio files to 16 kHz mono PCM.
