@extends('layout')

@section('title', 'Account')

@section('content')
    <h1>Your account</h1>
    <p>{{ $user->name }} &lt;{{ $user->email }}&gt;</p>
@endsection
