//! The check against a chip: a program within every limit has no excess, and each limit
//! crossed is reported once, named, with the figures.

use super::*;

fn array(name: &'static str, stage: u32, entries: u64, entry_bits: u32) -> RegisterArray {
    RegisterArray {
        name,
        part: 0,
        stage,
        entries,
        entry_bits,
        accesses: 1,
    }
}

fn fitting() -> ProgramBudget {
    ProgramBudget {
        program: "test",
        stages: 3,
        arrays: vec![
            array("a", 0, 1024, 64),
            array("b", 0, 1024, 64),
            array("c", 2, 16, 128),
        ],
        header_bytes: 64,
        multicast: Vec::new(),
        control_plane: Vec::new(),
        beyond: Vec::new(),
    }
}

#[test]
fn a_program_within_every_limit_has_no_excess() {
    assert_eq!(check(&fitting(), &ChipBudget::TOFINO), Vec::new());
}

#[test]
fn each_limit_crossed_is_reported_with_its_figures() {
    let chip = ChipBudget::TOFINO;
    let mut p = fitting();
    p.stages = 13;
    p.arrays
        .extend((0..4).map(|i| array(["d", "e", "f", "g"][i], 1, 32 * 1024, 128)));
    p.arrays.push(RegisterArray {
        accesses: 2,
        ..array("wide", 12, 1, 256)
    });
    p.header_bytes = 513;
    p.beyond.push(Beyond::LoopOverState("every port"));
    assert_eq!(
        check(&p, &chip),
        vec![
            Excess::Stages { used: 13, max: 12 },
            Excess::BitsInStage {
                stage: 1,
                bits: 4 * 32 * 1024 * 128,
                max: 64 * 1024 * 128
            },
            Excess::EntryBits {
                array: "wide",
                part: 0,
                bits: 256,
                max: 128
            },
            Excess::Accesses {
                array: "wide",
                part: 0,
                accesses: 2,
                max: 1
            },
            Excess::HeaderBytes { bytes: 513, max: 512 },
            Excess::Beyond(Beyond::LoopOverState("every port")),
        ]
    );
    // Four arrays in one stage is the limit; a fifth is past it.
    p.arrays.push(array("h", 1, 1, 8));
    assert!(check(&p, &chip).contains(&Excess::ArraysInStage {
        stage: 1,
        arrays: 5,
        max: 4
    }));
}

#[test]
fn an_array_past_the_declared_stages_counts_as_used() {
    let mut p = fitting();
    p.stages = 0;
    p.arrays.push(array("late", 20, 1, 8));
    assert_eq!(
        check(&p, &ChipBudget::TOFINO),
        vec![Excess::Stages { used: 21, max: 12 }]
    );
}

#[test]
fn huge_declarations_saturate_rather_than_overflow() {
    let mut p = fitting();
    p.arrays.push(array("x", 0, u64::MAX, u32::MAX));
    p.arrays.push(array("y", 0, u64::MAX, u32::MAX));
    let excesses = check(&p, &ChipBudget::TOFINO);
    assert!(excesses.contains(&Excess::BitsInStage {
        stage: 0,
        bits: u64::MAX,
        max: 64 * 1024 * 128
    }));
}

/// Paper 000, section 6.2.1: "For a typical 32 port switch, it would cost 5 stages".
#[test]
fn a_minimum_over_32_ports_takes_5_stages() {
    assert_eq!(tree_levels(32), 5);
    assert_eq!([0, 1, 2, 3, 4, 5, 33].map(tree_levels), [0, 0, 1, 2, 2, 3, 6]);
    assert_eq!(tree_levels(u64::MAX), 64);
}

/// NetChain's prototype (paper 002, section 7): 128-byte values in 8 stages of 64K 16-byte
/// slots, one stage's memory each; smaller arrays share a stage, four at most.
#[test]
fn a_wide_value_is_spread_over_stages_as_netchain_does() {
    let chip = ChipBudget::TOFINO;
    let (arrays, next) = pieces("value", 64 * 1024, 128 * 8, 2, &chip);
    assert_eq!(arrays.len(), 8);
    assert_eq!(
        arrays.iter().map(|a| a.stage).collect::<Vec<_>>(),
        (2..10).collect::<Vec<_>>()
    );
    assert_eq!(next, 10);
    let (small, next) = pieces("value", 4096, 256 * 8, 0, &chip);
    assert_eq!(small.len(), 16);
    assert_eq!(next, 4);
    assert!(
        check(
            &ProgramBudget {
                arrays: small,
                ..fitting()
            },
            &chip
        )
        .is_empty()
    );
    assert_eq!(pieces("none", 0, 0, 3, &chip), (Vec::new(), 3));
}
